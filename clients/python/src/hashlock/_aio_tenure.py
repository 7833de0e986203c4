"""asyncio twin of _tenure.py: a hold on a connection of the library's own
(a semaphore lease, a read-write lock's holds, a multi-key lock). A
cancelled wait aborts its connection: the server drops the waiter, and a
grant on its way (tied with KEEPALIVE) goes with it."""

import asyncio
from typing import Any, Callable, List, Optional

from redis.exceptions import ConnectionError, ResponseError, TimeoutError

from . import _protocol as p
from ._aio import Dedicated, Watch, pool_for
from ._aio_events import Follower
from ._family import STARTS
from .errors import LockLost, translate


async def translated(awaitable) -> Any:
    try:
        return await awaitable
    except ResponseError as e:
        typed = translate(e)
        if typed is e:
            raise
        raise typed from e


class Tenure:
    _what = "hold"

    def __init__(self, client: Any, key: Any, lease_ms: int, keepalive: bool, replicas: Any, on_lost: Optional[Callable[[LockLost], Any]]) -> None:
        if int(lease_ms) <= 0:
            raise ValueError("lease_ms must be a positive number of milliseconds")
        self._client = client
        self._key = key
        self.lease_ms = int(lease_ms)
        self.keepalive = keepalive
        self.replicas = p.replicas_option(replicas)
        self.on_lost = on_lost
        self._tied: Optional[Dedicated] = None
        self._watch: Optional[Watch] = None
        self._events: Optional[Follower] = None
        self._lost: Optional[LockLost] = None

    def _renew_cmds(self, keepalive: bool) -> List[List[Any]]:
        raise NotImplementedError

    def _held(self) -> bool:
        raise NotImplementedError

    def _undo_cmds(self, got: Any) -> List[List[Any]]:
        raise NotImplementedError

    async def _undo(self, cmds: List[List[Any]]) -> None:
        for cmd in cmds:
            try:
                await self._client.execute_command(*cmd)
            except Exception:
                pass

    def _forget(self) -> None:
        raise NotImplementedError

    def _describe(self) -> str:
        return f"{self._what} {self._key!r}"

    @property
    def lost(self) -> bool:
        return self._lost is not None

    @property
    def lost_reason(self) -> Optional[LockLost]:
        return self._lost

    def _lost_error(self, why: str) -> LockLost:
        return LockLost(f"{self._describe()} was lost: {why}")

    async def _wait(self, args: List[Any], block: Optional[int], parse: Callable[[Any], Any]) -> Any:
        pool, address = await pool_for(self._client, self._key)
        conn = Dedicated(pool, address)
        try:
            got = parse(await translated(conn.call(args, p.socket_timeout(block, self.replicas, conn.default_timeout))))
            if got is not None and not self.keepalive:
                try:
                    for cmd in self._renew_cmds(False):
                        untied = await translated(conn.call(cmd, p.socket_timeout(None, None, conn.default_timeout)))
                        if not int(untied):
                            conn.give_back()
                            raise self._lost_error("gone before the acquisition completed")
                except (ResponseError, LockLost):
                    raise
                except BaseException:
                    # Cancelled while untying: the server may have untied it
                    # already; give the grant back explicitly, before this
                    # object can acquire again (shielded: a second
                    # cancellation does not stop it).
                    await asyncio.shield(self._undo(self._undo_cmds(got)))
                    raise
        except ResponseError:
            conn.give_back()
            raise
        except BaseException:
            conn.abort()  # the server drops the waiter, and a tied grant with it
            raise
        if got is None or not self.keepalive:
            conn.give_back()
        else:
            self._tied = conn
        if got is not None:
            self._lost = None
            self._start_watch()
        return got

    async def _call(self, args: List[Any]) -> Any:
        watch = self._watch
        tied = self._tied
        if tied is None or watch is None:
            return await translated(self._client.execute_command(*args))
        async with watch.mutex:
            if not watch.active or self._tied is not tied:
                raise self._lost or self._lost_error("found lost")
            try:
                return await translated(tied.call(args, p.socket_timeout(None, self.replicas, tied.default_timeout)))
            except (ConnectionError, TimeoutError) as e:
                lost = self._lost_error(f"its KEEPALIVE connection failed ({e})")
                self._stop(lost, close=True)
                raise lost from e
            except ResponseError:
                raise
            except BaseException:
                # Cancelled mid-call: closing the connection ends every tied hold.
                self._stop(self._lost_error("a call on it was cancelled"), close=True)
                raise

    def _start_watch(self) -> None:
        if self._watch is not None and self._watch.active:
            return
        watch = Watch(
            self._tied,
            self.lease_ms / 3000,
            self._check,
            lambda: self._lose(self._lost_error("its KEEPALIVE connection closed"), close=True),
        )
        self._watch = watch
        self._events = Follower(self._client, self._key, lambda event: event in STARTS or watch.poke())

    async def _check(self) -> None:
        tied = self._tied if self.keepalive else None
        for cmd in self._renew_cmds(tied is not None):
            if tied is not None:
                try:
                    renewed = await translated(tied.call(cmd, p.socket_timeout(None, self.replicas, tied.default_timeout)))
                except (ConnectionError, TimeoutError, OSError) as e:
                    self._lose(self._lost_error(f"its KEEPALIVE connection failed ({e})"), close=True)
                    return
                if self._watch is not None:
                    self._watch.follow(tied)
            else:
                try:
                    renewed = await translated(self._client.execute_command(*cmd))
                except (ConnectionError, TimeoutError, OSError):
                    return
            if not int(renewed):
                self._lose(self._lost_error(f"{cmd[0]} found it gone"))
                return

    def _lose(self, lost: LockLost, close: bool = False) -> None:
        if self._watch is None or not self._watch.active:
            return
        self._stop(lost, close)
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
        self._forget()
        if lost is not None:
            self._lost = lost
        tied, self._tied = self._tied, None
        if tied is not None:
            if close:
                tied.abort()
            else:
                tied.give_back()
