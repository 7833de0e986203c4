"""SEMAPHORE.*, LATCH.*, RWLOCK.*, LOCK.MACQUIRE/MRELEASE: arguments and
reply parsing shared by the sync and asyncio objects (no I/O here)."""

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._protocol import DEFAULT_REPLICAS_TIMEOUT_MS, _text

#: What an Election's observer reports when no one leads.
VACANT = None


@dataclass(frozen=True)
class SemaphoreInfo:
    """SEMAPHORE.INFO: permits available, leased (not lapsed), waiters
    queued, leased permits tied to a connection, the key's TTL (-1: none)."""

    available: int
    leased: int
    waiters: int
    keepalive: int
    ttl_ms: int


@dataclass(frozen=True)
class RWLockInfo:
    """RWLOCK.INFO: mode ('read' or 'write'), the writer (None in read
    mode), its write holds, the distinct readers, their read holds, the
    TTL, waiters, owners whose holds are tied to a connection."""

    mode: str
    writer: Optional[str]
    write_holds: int
    readers: int
    read_holds: int
    ttl_ms: int
    waiters: int
    keepalive: int


@dataclass(frozen=True)
class Leader:
    """Who leads an Election and in which term (the fencing token of its
    winning acquisition)."""

    owner: str
    term: int


@dataclass(frozen=True)
class LeaderChange:
    """What an Election observer reports, in the order it happened:
    kind 'elected' (a new leader: `leader` set) or 'vacant' (the leader's
    hold ended: released, expired, forced, its connection closed; `leader`
    None, `event` says which)."""

    kind: str
    leader: Optional[Leader]
    event: str


def fields(reply: Any) -> Dict[str, Any]:
    """A map reply (RESP3) or a flat field/value array (RESP2)."""
    if isinstance(reply, dict):
        return {_text(k): v for k, v in reply.items()}
    return {_text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}


def parse_semaphore_info(reply: Any) -> Optional[SemaphoreInfo]:
    if reply is None:
        return None
    f = fields(reply)
    return SemaphoreInfo(
        available=int(f["available"]),
        leased=int(f["leased"]),
        waiters=int(f["waiters"]),
        keepalive=int(f["keepalive"]),
        ttl_ms=int(f["ttl"]),
    )


def parse_rwlock_info(reply: Any) -> Optional[RWLockInfo]:
    if reply is None:
        return None
    f = fields(reply)
    writer = f.get("writer")
    return RWLockInfo(
        mode=_text(f["mode"]),
        writer=None if writer in (None, b"", "") else _text(writer),
        write_holds=int(f["writeholds"]),
        readers=int(f["readers"]),
        read_holds=int(f["readholds"]),
        ttl_ms=int(f["ttl"]),
        waiters=int(f["waiters"]),
        keepalive=int(f["keepalive"]),
    )


def count_option(count: int) -> int:
    count = int(count)
    if count < 1:
        raise ValueError("count must be >= 1")
    return count


def with_options(
    args: List[Any],
    lease_ms: Optional[int] = None,
    block: Optional[int] = None,
    keepalive: bool = False,
    replicas: Optional[Tuple[int, int]] = None,
) -> List[Any]:
    if lease_ms is not None:
        args += ["PX", lease_ms]
    if block is not None:
        args += ["BLOCK", block]
    if keepalive:
        args.append("KEEPALIVE")
    if replicas is not None:
        args += ["REPLICAS", replicas[0], replicas[1]]
    return args


def untie_replicas() -> List[Any]:
    """See _protocol.untie_args: REPLICAS 0 on an untie."""
    return ["REPLICAS", 0, DEFAULT_REPLICAS_TIMEOUT_MS]


# -- semaphores ---------------------------------------------------------------


def sem_acquire_args(name, count, block, replicas) -> List[Any]:
    return with_options(["SEMAPHORE.ACQUIRE", name, "COUNT", count], block=block, replicas=replicas)


def sem_lease_args(name, count, lease_ms, keepalive, block, replicas) -> List[Any]:
    return with_options(
        ["SEMAPHORE.LEASE", name, "COUNT", count], lease_ms=lease_ms, block=block, keepalive=keepalive, replicas=replicas
    )


def parse_ids(reply: Any) -> Optional[List[str]]:
    if reply is None:
        return None
    return [_text(i) for i in reply]


# -- read-write locks ---------------------------------------------------------


def rw_acquire_args(name, owner, mode, lease_ms, keepalive, token, block, replicas) -> List[Any]:
    args = with_options(["RWLOCK.ACQUIRE", name, owner, mode, "PX", lease_ms], block=block, keepalive=keepalive)
    if token:
        args.append("TOKEN")
    if replicas is not None:
        args += ["REPLICAS", replicas[0], replicas[1]]
    return args


# -- multi-key locks ----------------------------------------------------------


def macquire_args(names: Sequence[Any], owner, lease_ms, keepalive, block, replicas) -> List[Any]:
    return with_options(
        ["LOCK.MACQUIRE", len(names), *names, owner, "PX", lease_ms], block=block, keepalive=keepalive, replicas=replicas
    )


def mrelease_args(names: Sequence[Any], owner) -> List[Any]:
    return ["LOCK.MRELEASE", len(names), *names, owner]


# -- events -------------------------------------------------------------------

#: Lifecycle events that say nothing about a hold's loss: a grant, and a
#: holder's own release (for a Lock, the holder's own: its release() is
#: under way). Every other event on a held key (`*.expired`, `*.forced`,
#: `*.closed`, and with more flags on DEL, an expiry, an eviction) is a
#: reason to check the hold at once.
STARTS = frozenset(
    {
        "lock.acquired",
        "rwlock.acquired",
        "semaphore.acquired",
        "lock.released",
        "rwlock.released",
        "semaphore.released",
        "latch.opened",
    }
)


def hears_lifecycle_events(flags: str) -> bool:
    """`notify-keyspace-events` delivers module events on keyspace
    channels: `K` (keyspace channels; `E` alone puts them on keyevent
    channels, which an observer of one key does not read) and `d` or `A`."""
    return "K" in flags and ("d" in flags or "A" in flags)


def events_disabled_message(flags: str) -> str:
    return (
        f"the server's notify-keyspace-events is {flags!r}: it needs K and d for the hashlock "
        "lifecycle events an Election observer (and the event-driven loss signal) listens to; "
        "set it with `CONFIG SET notify-keyspace-events Kd` (or `notify-keyspace-events Kd` in redis.conf)"
    )


def keyspace_channel(db: int, key: Any) -> bytes:
    k = key if isinstance(key, bytes) else str(key).encode()
    return b"__keyspace@%d__:" % int(db) + k
