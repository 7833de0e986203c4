"""hashlock.asyncio.Lock: the lock object for redis.asyncio clients
(Redis and RedisCluster). Same rules as hashlock.Lock; every method that
talks to the server is a coroutine.

Cancelling a waiting acquire() (asyncio.wait_for, TaskGroup, timeout())
closes its connection at once, so the server drops the waiter; it is never
granted the lock afterwards.
"""

import asyncio
from typing import Any, Dict, List, Optional, Tuple, Type

from redis.backoff import NoBackoff
from redis.exceptions import AskError, ConnectionError, MovedError, ResponseError, TimeoutError
from redis.asyncio.retry import Retry

from . import _protocol as p
from ._base import LockBase
from ._connection import MAX_REDIRECTS
from .errors import LockLost, NotAcquired, translate

__all__ = ["Lock"]


def _connection_factory(client: Any, name: Any) -> Tuple[Type, Dict[str, Any]]:
    get_node = getattr(client, "get_node_from_key", None)
    if get_node is not None:
        node = get_node(name)
        return node.connection_class, dict(node.connection_kwargs)
    pool = client.connection_pool
    return pool.connection_class, dict(pool.connection_kwargs)


class _Dedicated:
    """asyncio twin of hashlock._connection.Dedicated."""

    @classmethod
    async def open(cls, client: Any, name: Any) -> "_Dedicated":
        # An asyncio RedisCluster learns its slot map on first use.
        initialize = getattr(client, "initialize", None)
        if initialize is not None:
            await initialize()
        return cls(client, name)

    def __init__(self, client: Any, name: Any) -> None:
        self._cls, self._kwargs = _connection_factory(client, name)
        self.default_timeout: Optional[float] = self._kwargs.get("socket_timeout")
        self._kwargs.update(retry=Retry(NoBackoff(), 0), retry_on_timeout=False, retry_on_error=[])
        self._conn = None
        self._asking = False
        self.sent = False

    async def call(self, args: List[Any], timeout: Optional[float]) -> Any:
        redirects = 0
        while True:
            if self._conn is None:
                self._conn = self._cls(**self._kwargs)
                await self._conn.connect()
            conn = self._conn
            # None = no limit (redis-py: the attribute is read per call).
            conn.socket_timeout = timeout
            try:
                if self._asking:
                    await conn.send_command("ASKING")
                    await conn.read_response()
                await conn.send_command(*args)
                self.sent = True
                return await conn.read_response()
            except (MovedError, AskError) as redirect:
                redirects += 1
                if redirects > MAX_REDIRECTS:
                    raise
                self.abort()
                self._kwargs.update(host=redirect.host, port=redirect.port)
                self._asking = isinstance(redirect, AskError)
                self.sent = False

    def abort(self) -> None:
        """Closes the socket now, without awaiting anything: usable while
        the task is being cancelled."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        writer = getattr(conn, "_writer", None)
        if writer is not None:
            writer.transport.abort()
        try:
            conn._close() if hasattr(conn, "_close") else None
        except Exception:
            pass


class Lock(LockBase):
    """See hashlock.Lock: one Lock object is one owner; give each task its
    own. keepalive=False runs a watchdog task instead of tying the lock to
    the lock's connection."""

    _public_name = "hashlock.asyncio.Lock"
    # The task releasing a lock whose grant arrived after a cancelled wait.
    _cleanup: Optional[asyncio.Task] = None

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """See hashlock.Lock.acquire."""
        await self._settle()
        block = p.block_ms(blocking, timeout)
        if self._holds > 0:
            return await self._reenter()
        args = self._acquire_args(block)
        if self.keepalive:
            count = await self._acquire_tied(args, block)
        elif block is None:
            count = self._take(await self._execute(args))
        else:
            count = await self._acquire_waiting(args, block)
        if count is None:
            return False
        self._holds = count
        self._lost = False
        if not self.keepalive and self._watchdog is None:
            self._watchdog = asyncio.ensure_future(self._watch())
        return True

    async def _acquire_tied(self, args, block: Optional[int]) -> Optional[int]:
        conn = await _Dedicated.open(self._client, self.name)
        count = None
        try:
            reply = await self._translated(conn.call(args, p.socket_timeout(block, self.replicas, conn.default_timeout)))
            count = self._take(reply)
        finally:
            if count is None:
                conn.abort()
        self._tied = conn
        return count

    async def _acquire_waiting(self, args, block: int) -> Optional[int]:
        conn = await _Dedicated.open(self._client, self.name)
        try:
            reply = await self._translated(conn.call(args, p.socket_timeout(block, self.replicas, conn.default_timeout)))
        except BaseException:
            conn.abort()
            if conn.sent:
                # A grant may sit unread in the closed socket; give it back
                # in the background (a cancelled task cannot await), and
                # make the next call on this lock wait for that first.
                self._cleanup = asyncio.ensure_future(self._drop_unread_grant())
            raise
        finally:
            conn.abort()
        return self._take(reply)

    async def _drop_unread_grant(self) -> None:
        try:
            await self._client.execute_command("LOCK.RELEASE", self.name, self.owner)
        except Exception:
            pass

    async def _settle(self) -> None:
        cleanup, self._cleanup = self._cleanup, None
        if cleanup is not None:
            await cleanup

    async def _reenter(self) -> bool:
        args = self._acquire_args(None)
        if self.keepalive and self._tied is not None:
            reply = await self._on_tied(args)
        else:
            reply = await self._execute(args)
        count = self._take(reply)
        if count == self._holds + 1:
            self._holds = count
            return True
        if count is not None:
            await self._drop_unread_grant()
        self._forget()
        raise LockLost(f"lock {self.name!r} was lost while held by {self.owner!r} (re-entry found it gone)")

    async def release(self) -> int:
        """See hashlock.Lock.release."""
        await self._settle()
        args = ["LOCK.RELEASE", self.name, self.owner]
        try:
            if self.keepalive and self._tied is not None:
                left = int(await self._on_tied(args))
            else:
                left = int(await self._execute(args))
        except LockLost:
            self._forget()
            raise
        self._holds = left
        if left == 0:
            self._forget()
        return left

    async def renew(self) -> None:
        """See hashlock.Lock.renew."""
        args = p.renew_args(self.name, self.owner, self.lease_ms, self.keepalive, self.replicas)
        if self.keepalive:
            if self._tied is None:
                self._tied = await _Dedicated.open(self._client, self.name)
            renewed = await self._on_tied(args)
        else:
            renewed = await self._execute(args)
        if not int(renewed):
            self._forget()
            raise LockLost(f"lock {self.name!r} is not held by {self.owner!r} any more")

    async def locked(self) -> bool:
        return await self.info() is not None

    async def owned(self) -> bool:
        info = await self.info()
        return info is not None and info.owner == self.owner

    async def info(self) -> Optional[p.LockInfo]:
        return p.parse_info(await self._execute(["LOCK.INFO", self.name]))

    async def __aenter__(self) -> "Lock":
        if not await self.acquire():
            raise NotAcquired(f"lock {self.name!r}: the wait ended without the lock")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release()

    async def _execute(self, args) -> Any:
        return await self._translated(self._client.execute_command(*args))

    async def _on_tied(self, args) -> Any:
        conn = self._tied
        try:
            return await self._translated(conn.call(args, p.socket_timeout(None, self.replicas, conn.default_timeout)))
        except (ConnectionError, TimeoutError) as e:
            self._forget()
            raise LockLost(f"lock {self.name!r}: its KEEPALIVE connection failed ({e})") from e

    @staticmethod
    async def _translated(awaitable) -> Any:
        try:
            return await awaitable
        except ResponseError as e:
            typed = translate(e)
            if typed is e:
                raise
            raise typed from e

    def _forget(self) -> None:
        self._holds = 0
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None and watchdog is not asyncio.current_task():
            watchdog.cancel()
        if self._tied is not None:
            self._tied.abort()
            self._tied = None

    async def _watch(self) -> None:
        """keepalive=False only: renew every third of the lease."""
        args = p.renew_args(self.name, self.owner, self.lease_ms, False, self.replicas)
        me = asyncio.current_task()
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            try:
                renewed = await self._client.execute_command(*args)
            except Exception:
                continue
            if not int(renewed) and self._watchdog is me:
                self._lost = True
                self._watchdog = None
                return
