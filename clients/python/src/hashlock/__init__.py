"""hashlock: lock objects for the hashlock Redis/Valkey module.

    import redis, hashlock
    with hashlock.Lock(redis.Redis(), "orders:42"):
        ...

`hashlock.asyncio.Lock` is the same for redis.asyncio clients.
"""

from ._protocol import DEFAULT_LEASE_MS, LockInfo
from ._sync import Lock
from .errors import HashlockError, LockLost, ModuleNotLoaded, NoReplicas, NotAcquired, NotLock, NotOwner, WrongType

__all__ = [
    "DEFAULT_LEASE_MS",
    "HashlockError",
    "Lock",
    "LockInfo",
    "LockLost",
    "ModuleNotLoaded",
    "NoReplicas",
    "NotAcquired",
    "NotLock",
    "NotOwner",
    "WrongType",
]
