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


class NotAcquired(HashlockError):
    """`with lock:` ended its wait without the lock (the server answered
    nil, e.g. after CLIENT UNBLOCK)."""


_BY_CODE = {
    "NOTOWNER": LockLost,
    "NOTLOCK": NotLock,
    "WRONGTYPE": WrongType,
    "NOREPLICAS": NoReplicas,
}


def _unknown_lock_command(message: str) -> bool:
    text = message[4:] if message.startswith("ERR ") else message
    return text.lower().startswith("unknown command 'lock.")


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
