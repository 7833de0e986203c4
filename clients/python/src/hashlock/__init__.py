"""hashlock: lock objects for the hashlock Redis/Valkey module.

    import redis, hashlock
    with hashlock.Lock(redis.Redis(), "orders:42"):
        ...

Also Semaphore (and its Lease), Latch, ReadWriteLock, MultiLock and
Election. `hashlock.asyncio` has the same objects for redis.asyncio clients.
"""

from ._family import Leader, LeaderChange, RWLockInfo, SemaphoreInfo
from ._protocol import DEFAULT_LEASE_MS, LockInfo
from ._sync import Lock
from ._sync_family import Election, Latch, Lease, MultiLock, Observer, ReadHold, ReadWriteLock, Semaphore, WriteHold
from .errors import (
    CrossSlot,
    EventsDisabled,
    HashlockError,
    LockLost,
    ModuleNotLoaded,
    NoReplicas,
    NotAcquired,
    NotLatch,
    NotLock,
    NotOwner,
    NotSemaphore,
    NoUpgrade,
    WrongType,
)

__all__ = [
    "DEFAULT_LEASE_MS",
    "CrossSlot",
    "Election",
    "EventsDisabled",
    "HashlockError",
    "Latch",
    "Leader",
    "LeaderChange",
    "Lease",
    "Lock",
    "LockInfo",
    "LockLost",
    "ModuleNotLoaded",
    "MultiLock",
    "NoReplicas",
    "NoUpgrade",
    "NotAcquired",
    "NotLatch",
    "NotLock",
    "NotOwner",
    "NotSemaphore",
    "Observer",
    "ReadHold",
    "ReadWriteLock",
    "RWLockInfo",
    "Semaphore",
    "SemaphoreInfo",
    "WriteHold",
    "WrongType",
]
