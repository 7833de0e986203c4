"""hashlock.asyncio.Lock: the lock object for redis.asyncio clients
(Redis and RedisCluster). Same rules as hashlock.Lock; every method that
talks to the server is a coroutine.

Cancelling a waiting acquire() (asyncio.wait_for, TaskGroup, timeout())
closes its connection at once, so the server drops the waiter; a grant that
was already on its way is released by the server with the connection (the
wait is tied to it), so the cancelled waiter never keeps the lock.
"""

from typing import Any, Optional

from redis.exceptions import ConnectionError, ResponseError, TimeoutError

from . import _protocol as p
from ._aio import Dedicated, Watch, pool_for
from ._aio_events import Follower
from ._base import LockBase
from ._family import STARTS
from .errors import LockLost, NotAcquired, translate

__all__ = ["Election", "Latch", "Lease", "Lock", "MultiLock", "Observer", "ReadHold", "ReadWriteLock", "Semaphore", "WriteHold"]


class Lock(LockBase):
    """See hashlock.Lock: one Lock object is one owner; give each task its
    own. A held lock is watched by a task of the library's: `lost` turns
    True (and `on_lost` is called) when it is found gone."""

    _public_name = "hashlock.asyncio.Lock"

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """See hashlock.Lock.acquire."""
        block = p.block_ms(blocking, timeout)
        self._acknowledge_loss()
        if self._holds > 0:
            return await self._reenter()
        if self.keepalive or block is not None:
            count = await self._acquire_dedicated(block)
        else:
            count = self._take(await self._execute(self._acquire_args(None)))
        if count is None:
            return False
        self._holds = count
        self._lost = None
        self._start_watch()
        return True

    async def _acquire_dedicated(self, block: Optional[int]) -> Optional[int]:
        """See hashlock.Lock._acquire_dedicated: tied while it waits, so a
        cancelled wait (the connection aborted) never keeps a grant."""
        pool, address = await pool_for(self._client, self.name)
        conn = Dedicated(pool, address)
        try:
            reply = await self._translated(
                conn.call(
                    self._acquire_args(block, keepalive=True),
                    p.socket_timeout(block, self.replicas, conn.default_timeout),
                )
            )
            count = self._take(reply)
            if count is not None and not self.keepalive:
                untied = await self._translated(
                    conn.call(
                        p.untie_args(self.name, self.owner, self.lease_ms),
                        p.socket_timeout(None, None, conn.default_timeout),
                    )
                )
                if not int(untied):
                    conn.give_back()
                    raise self._lost_error("gone before the acquisition completed")
        except ResponseError:
            conn.give_back()
            raise
        except BaseException:
            conn.abort()
            raise
        if count is None or not self.keepalive:
            conn.give_back()
        else:
            self._tied = conn
        return count

    async def _reenter(self) -> bool:
        args = self._acquire_args(None)
        watch = self._watch
        if self._tied is not None and watch is not None:
            async with watch.mutex:
                if not watch.active:
                    raise self._lost or self._lost_error("found lost")
                try:
                    reply = await self._on_tied(args)
                except LockLost as lost:
                    self._stop(lost, close=True)
                    raise
        else:
            reply = await self._execute(args)
        count = self._take(reply)
        if count == self._holds + 1:
            self._holds = count
            return True
        if count is not None:
            try:
                await self._client.execute_command("LOCK.RELEASE", self.name, self.owner)
            except Exception:
                pass
        lost = self._lost_error("re-entry found it gone")
        self._stop(lost)
        raise lost

    async def release(self) -> int:
        """See hashlock.Lock.release."""
        self._unacknowledged = None
        args = ["LOCK.RELEASE", self.name, self.owner]
        watch = self._watch
        if self._tied is not None and watch is not None:
            async with watch.mutex:
                if watch.active:
                    return await self._release_on(args, tied=True)
        return await self._release_on(args, tied=False)

    async def _release_on(self, args, tied: bool) -> int:
        try:
            left = int(await (self._on_tied(args) if tied else self._execute(args)))
        except LockLost as lost:
            self._stop(lost, close=not isinstance(lost.__cause__, ResponseError))
            self._unacknowledged = None  # reported by this raise (see hashlock.Lock)
            raise
        self._holds = left
        if left == 0:
            self._stop(None)
        return left

    async def renew(self) -> None:
        """See hashlock.Lock.renew."""
        args = p.renew_args(self.name, self.owner, self.lease_ms, self.keepalive, self.replicas)
        watch = self._watch
        if self.keepalive and self._tied is not None and watch is not None:
            async with watch.mutex:
                try:
                    renewed = await self._on_tied(args) if watch.active else 0
                except LockLost as lost:
                    self._stop(lost, close=True)
                    raise
        elif self.keepalive:
            pool, address = await pool_for(self._client, self.name)
            conn = Dedicated(pool, address)
            try:
                renewed = await self._translated(
                    conn.call(args, p.socket_timeout(None, self.replicas, conn.default_timeout))
                )
            except ResponseError:
                conn.give_back()
                raise
            except BaseException:
                conn.abort()
                raise
            if int(renewed):
                self._stop(None)
                self._tied = conn
                self._holds = max(self._holds, 1)
                self._lost = None
                self._start_watch()
            else:
                conn.give_back()
        else:
            renewed = await self._execute(args)
        if not int(renewed):
            lost = self._lost_error("LOCK.RENEW found it gone")
            self._stop(lost)
            raise lost

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

    # -- loss detection ----------------------------------------------------

    def _start_watch(self) -> None:
        if self._watch is not None and self._watch.active:
            return
        watch = self._watch = Watch(
            self._tied,
            self._check_interval(),
            self._check,
            lambda: self._lose(self._lost_error("its KEEPALIVE connection closed"), close=True),
        )
        # Lifecycle events on the key: an ending event runs the check at once.
        self._events = Follower(self._client, self.name, lambda event: event in STARTS or watch.poke())

    async def _check(self) -> None:
        if self.keepalive and self._tied is not None:
            args = p.renew_args(self.name, self.owner, self.lease_ms, True, self.replicas)
            tied = self._tied
            try:
                renewed = await self._translated(
                    tied.call(args, p.socket_timeout(None, self.replicas, tied.default_timeout))
                )
            except (ConnectionError, TimeoutError, OSError) as e:
                self._lose(self._lost_error(f"its KEEPALIVE connection failed ({e})"), close=True)
                return
            if self._watch is not None:
                self._watch.follow(tied)  # it may have followed a MOVED
        else:
            args = p.renew_args(self.name, self.owner, self.lease_ms, False, self.replicas)
            try:
                renewed = await self._client.execute_command(*args)
            except (ConnectionError, TimeoutError, OSError):
                return  # transient: the lease is the safety net until the next try
        if not int(renewed):
            self._lose(self._lost_error("LOCK.RENEW found it gone"))

    def _lose(self, lost: LockLost, close: bool = False) -> None:
        if self._watch is None or not self._watch.active:
            return
        self._stop(lost, close)
        self._unacknowledged = lost
        if self.on_lost is not None:
            try:
                self.on_lost(lost)
            except Exception:
                pass

    def _stop(self, lost: Optional[LockLost], close: bool = False) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.stop()
        events, self._events = self._events, None
        if events is not None:
            events.close()
        self._holds = 0
        if lost is not None:
            self._lost = lost
        tied, self._tied = self._tied, None
        if tied is not None:
            if close:
                tied.abort()
            else:
                tied.give_back()

    # -- plumbing ----------------------------------------------------------

    async def _execute(self, args) -> Any:
        return await self._translated(self._client.execute_command(*args))

    async def _on_tied(self, args) -> Any:
        conn = self._tied
        try:
            return await self._translated(conn.call(args, p.socket_timeout(None, self.replicas, conn.default_timeout)))
        except (ConnectionError, TimeoutError) as e:
            raise self._lost_error(f"its KEEPALIVE connection failed ({e})") from e
        except ResponseError:
            raise
        except BaseException:
            # Cancelled mid-call: the reply would be read by the next call.
            # Closing the connection releases the tied lock on the server
            # (what a cancelled release wanted; for anything else a loss).
            releasing = args[0] == "LOCK.RELEASE"
            self._stop(None if releasing else self._lost_error("a call on it was cancelled"), close=True)
            raise

    @staticmethod
    async def _translated(awaitable) -> Any:
        try:
            return await awaitable
        except ResponseError as e:
            typed = translate(e)
            if typed is e:
                raise
            raise typed from e


from ._aio_family import Election, Latch, Lease, MultiLock, Observer, ReadHold, ReadWriteLock, Semaphore, WriteHold  # noqa: E402
