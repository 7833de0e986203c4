"""asyncio twins of _sync_family.py: Semaphore (and Lease), Latch,
ReadWriteLock, MultiLock, Election (observe() is an async iterator).
Cancelling a wait (asyncio.wait_for, asyncio.timeout, a TaskGroup) never
leaves what it waited for granted to it."""

import asyncio
import uuid
from typing import Any, AsyncIterator, Callable, List, Optional, Sequence

from redis.exceptions import ConnectionError, ResponseError, TimeoutError

from . import _family as f
from . import _protocol as p
from ._aio import Dedicated, pool_for
from ._aio_events import hub_for
from ._aio_tenure import Tenure, translated
from ._sync_family import _not_acquired
from .errors import EventsDisabled, LockLost


class Semaphore:
    """See hashlock.Semaphore; methods are coroutines, and lease() is used
    with `async with`."""

    def __init__(self, client: Any, name: Any, lease_ms: int = p.DEFAULT_LEASE_MS, keepalive: bool = True, replicas: Any = None) -> None:
        if int(lease_ms) <= 0:
            raise ValueError("lease_ms must be a positive number of milliseconds")
        self._client = client
        self.name = name
        self.lease_ms = int(lease_ms)
        self.keepalive = keepalive
        self.replicas = p.replicas_option(replicas)

    async def _execute(self, *args: Any) -> Any:
        return await translated(self._client.execute_command(*args))

    async def create(self, permits: int, lease_ms: Optional[int] = None) -> bool:
        args: List[Any] = ["SEMAPHORE.CREATE", self.name, int(permits)]
        if lease_ms is not None:
            args += ["PX", int(lease_ms)]
        return bool(await self._execute(*args))

    async def add(self, delta: int) -> int:
        return int(await self._execute("SEMAPHORE.ADD", self.name, int(delta)))

    async def available(self) -> int:
        info = await self.info()
        return 0 if info is None else info.available

    async def drain(self) -> int:
        return int(await self._execute("SEMAPHORE.DRAIN", self.name))

    async def info(self) -> Optional[f.SemaphoreInfo]:
        return f.parse_semaphore_info(await self._execute("SEMAPHORE.INFO", self.name))

    async def acquire(self, count: int = 1, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """Takes `count` anonymous permits; False if the wait ended without
        them. A cancelled wait never keeps permits: the wait itself is left
        to finish in the background while the library ends it on the server
        (CLIENT UNBLOCK), and a grant that was on its way is given back."""
        count = f.count_option(count)
        block = p.block_ms(blocking, timeout)
        args = f.sem_acquire_args(self.name, count, block, self.replicas)
        if block is None:
            return await self._execute(*args) is not None
        pool, address = await pool_for(self._client, self.name)
        conn = Dedicated(pool, address)
        try:
            await translated(conn.client_id())
        except ResponseError:
            conn.give_back()
            raise
        except BaseException:
            conn.abort()
            raise
        wait = asyncio.ensure_future(translated(conn.call(args, p.socket_timeout(block, self.replicas, conn.default_timeout))))
        try:
            reply = await asyncio.shield(wait)
        except asyncio.CancelledError:
            asyncio.ensure_future(_settle_abandoned(conn, wait, self.name))
            raise
        except ResponseError:
            conn.give_back()
            raise
        except BaseException:
            conn.abort()
            raise
        conn.give_back()
        return reply is not None

    async def release(self, count: int = 1) -> int:
        return int(await self._execute("SEMAPHORE.RELEASE", self.name, "COUNT", f.count_option(count)))

    async def lease(self, count: int = 1, blocking: bool = True, timeout: Optional[float] = None, on_lost: Optional[Callable[[LockLost], Any]] = None) -> "Lease":
        """Leases `count` permits (see hashlock.Semaphore.lease):
        `async with await sem.lease(2): ...` or `async with sem.leased(2): ...`."""
        lease = Lease(self, f.count_option(count), on_lost)
        if not await lease._take(p.block_ms(blocking, timeout)):
            raise _not_acquired(f"semaphore {self.name!r}: {count} permit(s)", timeout)
        return lease

    def leased(self, count: int = 1, blocking: bool = True, timeout: Optional[float] = None) -> "_Leasing":
        """`async with sem.leased(2) as lease:` leases on entry, returns on exit."""
        return _Leasing(self, count, blocking, timeout)


class _Leasing:
    def __init__(self, sem: Semaphore, count: int, blocking: bool, timeout: Optional[float]) -> None:
        self._args = (sem, count, blocking, timeout)
        self._lease: Optional[Lease] = None

    async def __aenter__(self) -> "Lease":
        sem, count, blocking, timeout = self._args
        self._lease = await sem.lease(count, blocking, timeout)
        return self._lease

    async def __aexit__(self, *exc: Any) -> None:
        if self._lease is not None:
            await self._lease.__aexit__(*exc)


async def _settle_abandoned(conn: Dedicated, wait: "asyncio.Future", name: Any) -> None:
    """See _sync_family._settle_abandoned."""
    cid = getattr(conn._conn, "_hashlock_id", None)
    try:
        if cid is None:
            conn.abort()
            return
        helper = Dedicated(conn.pool, conn.address)
        try:
            for _ in range(100):
                if wait.done():
                    break
                await helper.call(["CLIENT", "UNBLOCK", cid], 5)
                await asyncio.wait({wait}, timeout=0.1)
            helper.give_back()
        except BaseException:
            helper.abort()
            raise
        if not wait.done():
            wait.cancel()
            conn.abort()
            return
        reply = wait.result()
        if reply is not None:
            await conn.call(["SEMAPHORE.RELEASE", name, "COUNT", int(reply)], 5)
        conn.give_back()
    except BaseException:
        conn.abort()


class Lease(Tenure):
    """See hashlock.Lease (async: release(), renew(), `async with`)."""

    _what = "semaphore lease"

    def __init__(self, semaphore: Semaphore, count: int, on_lost: Optional[Callable[[LockLost], Any]]) -> None:
        super().__init__(semaphore._client, semaphore.name, semaphore.lease_ms, semaphore.keepalive, semaphore.replicas, on_lost)
        self.semaphore = semaphore
        self.count = count
        self.ids: List[str] = []

    def _describe(self) -> str:
        return f"lease of {self.count} permit(s) of semaphore {self._key!r}"

    async def _take(self, block: Optional[int]) -> bool:
        args = f.sem_lease_args(self._key, self.count, self.lease_ms, True, block, self.replicas)
        ids = await self._wait(args, block, f.parse_ids)
        if ids is None:
            return False
        self.ids = ids
        return True

    def _renew_cmds(self, keepalive: bool) -> List[List[Any]]:
        return [f.with_options(["SEMAPHORE.RENEW", self._key, i, "PX", self.lease_ms], keepalive=keepalive, replicas=self.replicas) for i in self.ids]

    def _held(self) -> bool:
        return bool(self.ids)

    def _undo_cmds(self, got: Any) -> List[List[Any]]:
        return [["SEMAPHORE.RETURN", self._key, *got]]

    def _forget(self) -> None:
        self.ids = []

    @property
    def held(self) -> bool:
        return bool(self.ids) and not self.lost

    async def release(self) -> int:
        ids = list(self.ids)
        if not ids:
            raise self._lost or self._lost_error("already returned")
        try:
            n = int(await self._call(["SEMAPHORE.RETURN", self._key, *ids]))
        except LockLost as lost:
            for i in ids:
                try:
                    await self._call(["SEMAPHORE.RETURN", self._key, i])
                except (LockLost, ResponseError):
                    pass
            self._stop(lost)
            raise
        self._stop(None)
        return n

    async def renew(self) -> None:
        for cmd in self._renew_cmds(self.keepalive and self._tied is not None):
            if not int(await self._call(cmd)):
                lost = self._lost_error(f"{cmd[0]} found it gone")
                self._stop(lost)
                raise lost

    async def __aenter__(self) -> "Lease":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if not self.ids:
            return
        if exc and isinstance(exc[1], asyncio.CancelledError) and self._tied is not None:
            # Cancelled: closing the tied connection returns the permits at
            # once, with nothing to await.
            self._stop(None, close=True)
            return
        await self.release()

    def __repr__(self) -> str:
        return f"<hashlock.asyncio.Lease semaphore={self._key!r} ids={self.ids!r}>"


class Latch:
    """See hashlock.Latch; methods are coroutines."""

    def __init__(self, client: Any, name: Any) -> None:
        self._client = client
        self.name = name

    async def _execute(self, *args: Any) -> Any:
        return await translated(self._client.execute_command(*args))

    async def create(self, count: int) -> bool:
        if int(count) < 1:
            raise ValueError("count must be >= 1")
        return bool(await self._execute("LATCH.CREATE", self.name, int(count)))

    async def count_down(self) -> int:
        return int(await self._execute("LATCH.COUNTDOWN", self.name))

    async def count(self) -> int:
        return int(await self._execute("LATCH.COUNT", self.name))

    async def wait(self, timeout: Optional[float] = None) -> bool:
        if timeout is not None and timeout <= 0:
            return await self._execute("LATCH.AWAIT", self.name) is not None
        block = p.block_ms(True, timeout)
        pool, address = await pool_for(self._client, self.name)
        conn = Dedicated(pool, address)
        try:
            reply = await translated(conn.call(["LATCH.AWAIT", self.name, "BLOCK", block], p.socket_timeout(block, None, conn.default_timeout)))
        except ResponseError:
            conn.give_back()
            raise
        except BaseException:
            conn.abort()
            raise
        conn.give_back()
        return reply is not None


class _Hold:
    mode = ""

    def __init__(self, rw: "ReadWriteLock", token: Optional[int] = None) -> None:
        self.rw = rw
        self.token = token
        self.released = False

    async def release(self) -> int:
        if self.released:
            raise LockLost(f"this {self.mode.lower()} hold of {self.rw.name!r} was already released")
        self.released = True
        return await self.rw.release(self.mode)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.released:
            return
        if exc and isinstance(exc[1], asyncio.CancelledError) and self.rw._tied is not None and self.rw._only_hold():
            # Cancelled: closing the tied connection releases at once.
            self.released = True
            self.rw._stop(None, close=True)
            return
        await self.release()


class ReadHold(_Hold):
    mode = "READ"


class WriteHold(_Hold):
    mode = "WRITE"

    async def downgrade(self) -> ReadHold:
        if self.released:
            raise LockLost(f"this write hold of {self.rw.name!r} was already released")
        read = await self.rw.read(blocking=False)
        await self.release()
        return read


class ReadWriteLock(Tenure):
    """See hashlock.ReadWriteLock: `async with await rw.read():`,
    `async with await rw.write(timeout=5) as w:`."""

    _what = "read-write lock"

    def __init__(
        self,
        client: Any,
        name: Any,
        lease_ms: int = p.DEFAULT_LEASE_MS,
        keepalive: bool = True,
        token: bool = False,
        replicas: Any = None,
        owner: Optional[str] = None,
        on_lost: Optional[Callable[[LockLost], Any]] = None,
    ) -> None:
        super().__init__(client, name, lease_ms, keepalive, replicas, on_lost)
        self.name = name
        self.owner = owner if owner is not None else str(uuid.uuid4())
        self.use_token = token
        self._reads = 0
        self._writes = 0
        self._mutex = asyncio.Lock()

    def _describe(self) -> str:
        return f"read-write lock {self.name!r} held by {self.owner!r}"

    def _renew_cmds(self, keepalive: bool) -> List[List[Any]]:
        return [f.with_options(["RWLOCK.RENEW", self.name, self.owner, "PX", self.lease_ms], keepalive=keepalive, replicas=self.replicas)]

    def _held(self) -> bool:
        return self._reads + self._writes > 0

    def _undo_cmds(self, got: Any) -> List[List[Any]]:
        return [["RWLOCK.RELEASE", self.name, self.owner, self._asked]]

    def _only_hold(self) -> bool:
        return self._reads + self._writes == 1

    def _forget(self) -> None:
        self._reads = self._writes = 0

    @property
    def read_holds(self) -> int:
        return self._reads

    @property
    def write_holds(self) -> int:
        return self._writes

    async def acquire(self, mode: str, blocking: bool = True, timeout: Optional[float] = None) -> Any:
        mode = mode.upper()
        if mode not in ("READ", "WRITE"):
            raise ValueError("mode must be 'READ' or 'WRITE'")
        token = self.use_token and mode == "WRITE"
        block = p.block_ms(blocking, timeout)
        async with self._mutex:
            if self._held():
                args = f.rw_acquire_args(self.name, self.owner, mode, self.lease_ms, self.keepalive and self._tied is not None, token, None, self.replicas)
                reply = await self._call(args)
                count, tok = p.parse_acquire(reply, token)
                expected = (self._writes if mode == "WRITE" else self._reads) + 1
                if count != expected:
                    if count is not None:
                        try:
                            await self._client.execute_command("RWLOCK.RELEASE", self.name, self.owner, mode)
                        except Exception:
                            pass
                    lost = self._lost_error("a re-entry found it gone")
                    self._stop(lost)
                    raise lost
            else:
                args = f.rw_acquire_args(self.name, self.owner, mode, self.lease_ms, True, token, block, self.replicas)
                self._asked = mode
                got = await self._wait(args, block, lambda reply: None if reply is None else p.parse_acquire(reply, token))
                if got is None:
                    return None
                count, tok = got
            if mode == "WRITE":
                self._writes = count
            else:
                self._reads = count
            return (count, tok) if token else count

    async def release(self, mode: str) -> int:
        mode = mode.upper()
        async with self._mutex:
            try:
                left = int(await self._call(["RWLOCK.RELEASE", self.name, self.owner, mode]))
            except LockLost:
                if self._held():
                    self._stop(self._lost or self._lost_error("RWLOCK.RELEASE found it gone"))
                raise
            if mode == "WRITE":
                self._writes = left
            else:
                self._reads = left
            if not self._held():
                self._stop(None)
            return left

    async def read(self, blocking: bool = True, timeout: Optional[float] = None) -> ReadHold:
        if await self.acquire("READ", blocking, timeout) is None:
            raise _not_acquired(f"read-write lock {self.name!r}: READ", timeout)
        return ReadHold(self)

    async def write(self, blocking: bool = True, timeout: Optional[float] = None) -> WriteHold:
        got = await self.acquire("WRITE", blocking, timeout)
        if got is None:
            raise _not_acquired(f"read-write lock {self.name!r}: WRITE", timeout)
        return WriteHold(self, got[1] if self.use_token else None)

    async def renew(self) -> None:
        async with self._mutex:
            if not int(await self._call(self._renew_cmds(self.keepalive and self._tied is not None)[0])):
                lost = self._lost_error("RWLOCK.RENEW found it gone")
                self._stop(lost)
                raise lost

    async def info(self) -> Optional[f.RWLockInfo]:
        return f.parse_rwlock_info(await translated(self._client.execute_command("RWLOCK.INFO", self.name)))


class MultiLock(Tenure):
    """See hashlock.MultiLock: `async with MultiLock(r, names):`."""

    _what = "multi-key lock"

    def __init__(
        self,
        client: Any,
        names: Sequence[Any],
        lease_ms: int = p.DEFAULT_LEASE_MS,
        keepalive: bool = True,
        replicas: Any = None,
        owner: Optional[str] = None,
        on_lost: Optional[Callable[[LockLost], Any]] = None,
    ) -> None:
        names = list(names)
        if not names:
            raise ValueError("a MultiLock needs at least one name")
        super().__init__(client, names[0], lease_ms, keepalive, replicas, on_lost)
        self.names = names
        self.owner = owner if owner is not None else str(uuid.uuid4())
        self._holds = 0
        self._mutex = asyncio.Lock()

    def _describe(self) -> str:
        return f"multi-key lock {self.names!r} held by {self.owner!r}"

    def _renew_cmds(self, keepalive: bool) -> List[List[Any]]:
        return [p.renew_args(n, self.owner, self.lease_ms, keepalive, self.replicas) for n in self.names]

    def _held(self) -> bool:
        return self._holds > 0

    def _undo_cmds(self, got: Any) -> List[List[Any]]:
        return [f.mrelease_args(self.names, self.owner)]

    def _forget(self) -> None:
        self._holds = 0

    @property
    def holds(self) -> int:
        return self._holds

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        block = p.block_ms(blocking, timeout)
        async with self._mutex:
            if self._holds > 0:
                args = f.macquire_args(self.names, self.owner, self.lease_ms, self.keepalive and self._tied is not None, None, self.replicas)
                reply = await self._call(args)
                counts = None if reply is None else [int(c) for c in reply]
                if counts is None or any(c != self._holds + 1 for c in counts):
                    if counts is not None:
                        try:
                            await self._call(f.mrelease_args(self.names, self.owner))
                        except Exception:
                            pass
                    lost = self._lost_error("a re-entry found it gone")
                    self._stop(lost)
                    raise lost
                self._holds += 1
                return True
            args = f.macquire_args(self.names, self.owner, self.lease_ms, True, block, self.replicas)
            counts = await self._wait(args, block, lambda reply: None if reply is None else [int(c) for c in reply])
            if counts is None:
                return False
            self._holds = min(counts)
            return True

    async def release(self) -> int:
        async with self._mutex:
            try:
                left = [int(c) for c in await self._call(f.mrelease_args(self.names, self.owner))]
            except LockLost:
                if self._holds:
                    self._stop(self._lost or self._lost_error("LOCK.MRELEASE found it gone"))
                raise
            self._holds = max(left) if left else 0
            if self._holds == 0:
                self._stop(None)
            return self._holds

    async def __aenter__(self) -> "MultiLock":
        if not await self.acquire():
            raise _not_acquired(f"multi-key lock {self.names!r}", None)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if exc and isinstance(exc[1], asyncio.CancelledError) and self._tied is not None and self._holds == 1:
            self._stop(None, close=True)
            return
        await self.release()


class Election:
    """See hashlock.Election: campaign(), resign(), leader() are coroutines;
    `async for change in election.observe():` follows who leads."""

    def __init__(
        self,
        client: Any,
        name: Any,
        owner: Optional[str] = None,
        lease_ms: int = p.DEFAULT_LEASE_MS,
        on_elected: Optional[Callable[[int], Any]] = None,
        on_revoked: Optional[Callable[[LockLost], Any]] = None,
    ) -> None:
        from .asyncio import Lock

        self._client = client
        self.name = name
        self.on_elected = on_elected
        self.on_revoked = on_revoked
        self._lock = Lock(client, name, lease_ms=lease_ms, keepalive=True, token=True, owner=owner, on_lost=self._revoked)

    @property
    def owner(self) -> str:
        return self._lock.owner

    @property
    def term(self) -> Optional[int]:
        return self._lock.token if self.is_leader else None

    @property
    def is_leader(self) -> bool:
        return self._lock.holds > 0 and not self._lock.lost

    def _revoked(self, err: LockLost) -> None:
        if self.on_revoked is not None:
            self.on_revoked(err)

    async def campaign(self, timeout: Optional[float] = None) -> int:
        if self.is_leader:
            return self._lock.token  # type: ignore[return-value]
        if not await self._lock.acquire(timeout=timeout):
            raise _not_acquired(f"election {self.name!r}", timeout)
        term = self._lock.token
        if self.on_elected is not None:
            self.on_elected(term)
        return term  # type: ignore[return-value]

    async def resign(self) -> None:
        while self._lock.holds > 0:
            await self._lock.release()

    async def leader(self) -> Optional[f.Leader]:
        info = await self._lock.info()
        if info is None:
            return None
        return f.Leader(info.owner, int(info.token or 0))

    def observe(self) -> "Observer":
        """`async for change in election.observe():` (or `async with` it,
        then iterate); EventsDisabled on the first step if the server does
        not deliver the events."""
        return Observer(self)


class Observer:
    """See hashlock.Observer: an async iterator of LeaderChange; a task of
    its own turns each event into changes as it arrives."""

    def __init__(self, election: Election) -> None:
        self._election = election
        self._events: "asyncio.Queue[str]" = asyncio.Queue()
        self._changes: "asyncio.Queue[Optional[f.LeaderChange]]" = asyncio.Queue()
        self._last: Optional[f.Leader] = None
        self._sub: Any = None
        self._hub: Any = None
        self._channel = b""
        self._closed = False
        self._task: Optional[asyncio.Task] = None

    async def start(self) -> "Observer":
        """Subscribes (EventsDisabled if the server does not deliver the
        events); iterating starts it too."""
        if self._hub is not None:
            return self
        self._hub, self._channel = await hub_for(self._election._client, self._election.name)
        self._hub.refresh_flags()
        flags = await self._hub.flags()
        if flags is not None and not f.hears_lifecycle_events(flags):
            self._hub = None
            raise EventsDisabled(f.events_disabled_message(flags))
        self._sub = await self._hub.subscribe(self._channel, self._events.put_nowait)
        self._events.put_nowait("(start)")
        self._task = asyncio.ensure_future(self._run())
        return self

    async def _run(self) -> None:
        try:
            while True:
                event = await self._events.get()
                if self._closed:
                    break
                try:
                    changes = await self._advance(event)
                except Exception:
                    await asyncio.sleep(0.1)
                    self._events.put_nowait("(retry)")
                    continue
                for change in changes:
                    self._changes.put_nowait(change)
        finally:
            self._changes.put_nowait(None)

    async def _advance(self, event: str) -> List[f.LeaderChange]:
        if event == "":
            if not self._closed:
                self._sub = await self._hub.subscribe(self._channel, self._events.put_nowait)
            event = "(resubscribed)"
        now = await self._election.leader()
        last = self._last
        if now == last or (now is not None and last is not None and now.term == last.term):
            return []
        changes = []
        if last is not None:
            changes.append(f.LeaderChange("vacant", None, event))
        if now is not None:
            changes.append(f.LeaderChange("elected", now, event))
        self._last = now
        return changes

    async def next(self, timeout: Optional[float] = None) -> Optional[f.LeaderChange]:
        await self.start()
        try:
            return await asyncio.wait_for(self._changes.get(), timeout)
        except asyncio.TimeoutError:
            return None

    def __aiter__(self) -> AsyncIterator[f.LeaderChange]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[f.LeaderChange]:
        try:
            while True:
                change = await self.next()
                if change is None:
                    return
                yield change
        finally:
            self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._sub is not None:
            self._sub.close()
        self._events.put_nowait("(closed)")

    async def __aenter__(self) -> "Observer":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        self.close()
