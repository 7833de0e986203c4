"""LOCK.* command arguments and reply parsing, shared by the sync and asyncio
locks (no I/O here)."""

import math
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

#: Redisson's watchdog lease and the module's default.
DEFAULT_LEASE_MS = 30_000
#: REPLICAS timeout when only a replica count is given.
DEFAULT_REPLICAS_TIMEOUT_MS = 1_000
#: How much longer than BLOCK (plus any REPLICAS wait) a waiter's socket
#: waits for the server's answer before it gives up and closes the
#: connection. The server answers at BLOCK's end itself; this only guards
#: against a server that stopped answering.
SOCKET_MARGIN_S = 10.0


@dataclass(frozen=True)
class LockInfo:
    """LOCK.INFO's answer. `keepalive` and `token` are None on a module that
    does not report them yet."""

    owner: str
    holds: int
    ttl_ms: int
    waiters: int
    keepalive: Optional[bool] = None
    token: Optional[int] = None


def replicas_option(replicas: Any) -> Optional[Tuple[int, int]]:
    """`replicas=n` or `replicas=(n, timeout_ms)` → (n, timeout_ms)."""
    if replicas is None:
        return None
    if isinstance(replicas, int):
        n, ms = replicas, DEFAULT_REPLICAS_TIMEOUT_MS
    else:
        n, ms = replicas
    if n < 0 or ms <= 0:
        raise ValueError("replicas must be n >= 0 (and a timeout_ms > 0)")
    return int(n), int(ms)


def block_ms(blocking: bool, timeout: Optional[float]) -> Optional[int]:
    """The BLOCK argument for acquire(blocking, timeout): None = do not
    block, 0 = wait forever (XREAD's convention), else milliseconds."""
    if not blocking:
        if timeout not in (None, -1):
            raise ValueError("a timeout needs blocking=True")
        return None
    if timeout is None or timeout == -1:
        return 0
    if timeout < 0:
        raise ValueError("timeout must be >= 0 seconds, or None to wait forever")
    if timeout == 0:
        return None
    return max(1, math.ceil(timeout * 1000))


def socket_timeout(block: Optional[int], replicas: Optional[Tuple[int, int]], base: Optional[float]) -> Optional[float]:
    """The socket timeout of a dedicated connection: it must outlast BLOCK
    (None for BLOCK 0: wait as long as the server does) and the REPLICAS
    wait, or the client would give up on a waiter the server may still
    grant the lock to."""
    if block == 0:
        return None
    extra = (block or 0) / 1000 + (replicas[1] / 1000 if replicas else 0)
    if block is None and base is not None:
        return base + extra
    return extra + SOCKET_MARGIN_S


def acquire_args(name, owner, lease_ms, keepalive, token, replicas, block: Optional[int]) -> List[Any]:
    args: List[Any] = ["LOCK.ACQUIRE", name, owner, "PX", lease_ms]
    if block is not None:
        args += ["BLOCK", block]
    if keepalive:
        args.append("KEEPALIVE")
    if token:
        args.append("TOKEN")
    if replicas is not None:
        args += ["REPLICAS", replicas[0], replicas[1]]
    return args


def renew_args(name, owner, lease_ms, keepalive, replicas) -> List[Any]:
    args: List[Any] = ["LOCK.RENEW", name, owner, "PX", lease_ms]
    if keepalive:
        args.append("KEEPALIVE")
    if replicas is not None:
        args += ["REPLICAS", replicas[0], replicas[1]]
    return args


def untie_args(name, owner, lease_ms) -> List[Any]:
    """keepalive=False after a wait: the wait was tied to its connection
    (KEEPALIVE), so that a grant on its way to a wait abandoned on the client
    side is released by the server when the connection closes; once the
    grant is read, this makes it a plain lease again. REPLICAS 0: the grant
    itself was acknowledged as asked; a lost untie only shortens the lease
    to the grant's."""
    return ["LOCK.RENEW", name, owner, "PX", lease_ms, "REPLICAS", 0, DEFAULT_REPLICAS_TIMEOUT_MS]


def parse_acquire(reply: Any, token: bool) -> Tuple[Optional[int], Optional[int]]:
    """(hold count or None when busy, fencing token or None)."""
    if reply is None:
        return None, None
    if token:
        if not isinstance(reply, (list, tuple)) or len(reply) != 2:
            raise ValueError(f"LOCK.ACQUIRE ... TOKEN: expected [count, token], got {reply!r}")
        return int(reply[0]), int(reply[1])
    return int(reply), None


def _text(v: Any) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def parse_info(reply: Any) -> Optional[LockInfo]:
    """LOCK.INFO in RESP2 (flat field/value list) or RESP3 (map)."""
    if reply is None:
        return None
    if isinstance(reply, dict):
        fields = {_text(k): v for k, v in reply.items()}
    else:
        fields = {_text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}
    keepalive = fields.get("keepalive")
    token = fields.get("token")
    return LockInfo(
        owner=_text(fields["owner"]),
        holds=int(fields["holds"]),
        ttl_ms=int(fields["ttl"]),
        waiters=int(fields["waiters"]),
        keepalive=None if keepalive is None else bool(int(keepalive)),
        token=None if token is None else int(token),
    )
