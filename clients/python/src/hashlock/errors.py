"""Typed errors for the module's error codes.

They subclass redis-py's ResponseError so existing `except ResponseError`
handlers still catch them.
"""

from redis.exceptions import ResponseError


class HashlockError(ResponseError):
    """Base class of every error this library raises for a lock."""


class LockLost(HashlockError):
    """The lock is not held by this owner any more: its lease ran out, it was
    force-released, or its KEEPALIVE connection closed. Raised by release()
    (the server's NOTOWNER) and renew() (LOCK.RENEW answered 0). Whatever the
    lock protected may have been touched by someone else meanwhile."""


#: The server's name for it: LOCK.RELEASE by an owner that does not hold it.
NotOwner = LockLost


class NotLock(HashlockError):
    """The key holds a hash that is not a lock (NOTLOCK)."""


class WrongType(HashlockError):
    """The key holds a value that is not a hash (WRONGTYPE)."""


class NoReplicas(HashlockError):
    """REPLICAS n ms: fewer than n replicas acknowledged in time; the call
    was undone (NOREPLICAS)."""


class ModuleNotLoaded(HashlockError):
    """The server does not know LOCK.*: the hashlock module is not loaded
    there (load it with `loadmodule` or `MODULE LOAD`)."""


class NoUpgrade(HashlockError):
    """ReadWriteLock: WRITE asked by an owner that holds READ but not WRITE
    (NOUPGRADE). An upgrade would deadlock: release the read hold first.
    Nothing changed."""


class NotSemaphore(HashlockError):
    """The key holds a string that is not a permit count (NOTSEMAPHORE)."""


class NotLatch(HashlockError):
    """The key holds a string that is not a latch count (NOTLATCH)."""


class CrossSlot(HashlockError):
    """Cluster: the keys (or a key and the one the server derives from it)
    are in different slots (CROSSSLOT). A MultiLock's names must share a
    slot: give them one hash tag, e.g. `{order:42}:a`, `{order:42}:b`."""


class EventsDisabled(HashlockError):
    """The server's `notify-keyspace-events` cannot deliver the module's
    lifecycle events (it needs `K` or `E`, and `d`): an Election observer
    would never hear of a change. Set it, e.g.
    `CONFIG SET notify-keyspace-events Kd` (or `notify-keyspace-events Kd`
    in redis.conf)."""


class NotAcquired(HashlockError):
    """`with lock:` (or a lease, a read or write hold, a campaign) ended its
    wait without what it asked for (a timeout, or the server answered nil,
    e.g. after CLIENT UNBLOCK)."""


_BY_CODE = {
    "NOTOWNER": LockLost,
    "NOTLOCK": NotLock,
    "WRONGTYPE": WrongType,
    "NOREPLICAS": NoReplicas,
    "NOUPGRADE": NoUpgrade,
    "NOTSEMAPHORE": NotSemaphore,
    "NOTLATCH": NotLatch,
    "CROSSSLOT": CrossSlot,
}


def _unknown_lock_command(message: str) -> bool:
    text = message[4:] if message.startswith("ERR ") else message
    return text.lower().startswith(("unknown command 'lock.", "unknown command 'semaphore.", "unknown command 'latch.", "unknown command 'rwlock."))


def translate(err: ResponseError) -> Exception:
    """The typed error for a server error reply, or the reply itself."""
    message = str(err)
    if _unknown_lock_command(message):
        typed = ModuleNotLoaded(f"the hashlock module is not loaded on this server ({message.strip()})")
        typed.__cause__ = err
        return typed
    cls = _BY_CODE.get(message.split(" ", 1)[0])
    if cls is None:
        return err
    typed = cls(message)
    typed.__cause__ = err
    return typed
