"""The rest of the family for redis.Redis and redis.RedisCluster:
Semaphore (and its Lease), Latch, ReadWriteLock, MultiLock, Election."""

import queue
import threading
import time
import uuid
from typing import Any, Callable, Iterator, List, Optional, Sequence

from redis.exceptions import ConnectionError, ResponseError, TimeoutError

from . import _events
from . import _family as f
from . import _protocol as p
from ._connection import Dedicated, pool_for
from ._sync import Lock
from ._tenure import Tenure, translated
from .errors import EventsDisabled, LockLost, NotAcquired


def _not_acquired(what: str, timeout: Optional[float]) -> NotAcquired:
    within = "" if timeout is None else f" within {timeout} s"
    return NotAcquired(f"{what}: the wait ended without it{within}")


# -- semaphores ---------------------------------------------------------------


class Semaphore:
    """A semaphore at `name` (SEMAPHORE.*; Redisson's RSemaphore and
    RPermitExpirableSemaphore share it). Waits queue in the server, first
    come first served (a head asking for 3 permits is not overtaken by a
    later waiter asking for 1).

    Two kinds of permits:
    - acquire()/release(): anonymous permits (Redisson's tryAcquire): they
      have no owner and come back only by release(), from anyone.
    - lease(): permits with ids, tied by default (keepalive=True) to a
      connection of the library's own: the server renews them while it is
      open and returns them the moment it closes (a crashed process never
      keeps them). `with sem.lease(2):` returns them on exit, error or
      interruption. keepalive=False: a lease of lease_ms that the library
      renews every third of it.
    """

    def __init__(self, client: Any, name: Any, lease_ms: int = p.DEFAULT_LEASE_MS, keepalive: bool = True, replicas: Any = None) -> None:
        if int(lease_ms) <= 0:
            raise ValueError("lease_ms must be a positive number of milliseconds")
        self._client = client
        self.name = name
        self.lease_ms = int(lease_ms)
        self.keepalive = keepalive
        self.replicas = p.replicas_option(replicas)

    def _execute(self, *args: Any) -> Any:
        return translated(self._client.execute_command, *args)

    def create(self, permits: int, lease_ms: Optional[int] = None) -> bool:
        """Sets the permit count if no semaphore exists yet (True), else
        changes nothing (False)."""
        args: List[Any] = ["SEMAPHORE.CREATE", self.name, int(permits)]
        if lease_ms is not None:
            args += ["PX", int(lease_ms)]
        return bool(self._execute(*args))

    def add(self, delta: int) -> int:
        """Adds `delta` permits (may be negative); returns those available."""
        return int(self._execute("SEMAPHORE.ADD", self.name, int(delta)))

    def available(self) -> int:
        info = self.info()
        return 0 if info is None else info.available

    def drain(self) -> int:
        """Takes every available permit; returns how many."""
        return int(self._execute("SEMAPHORE.DRAIN", self.name))

    def info(self) -> Optional[f.SemaphoreInfo]:
        return f.parse_semaphore_info(self._execute("SEMAPHORE.INFO", self.name))

    def acquire(self, count: int = 1, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """Takes `count` anonymous permits; False if the wait ended without
        them. A wait interrupted on the client side (KeyboardInterrupt, an
        exception from a signal handler) never keeps permits: the library
        ends it on the server (CLIENT UNBLOCK) and gives back a grant that
        was already on its way."""
        count = f.count_option(count)
        block = p.block_ms(blocking, timeout)
        args = f.sem_acquire_args(self.name, count, block, self.replicas)
        if block is None:
            return self._execute(*args) is not None
        pool, address = pool_for(self._client, self.name)
        conn = Dedicated(pool, address)
        try:
            translated(conn.client_id)  # known before the wait: see _settle_abandoned
        except ResponseError:
            conn.give_back()
            raise
        except BaseException:
            conn.close()
            raise
        # The wait runs on a thread of its own, so that an exception in this
        # one (KeyboardInterrupt, a signal handler's) can never land between
        # the grant's arrival and its use: the waiting thread always reads
        # the answer, and an abandoned wait's answer is settled there.
        wait = _Wait(conn, args, p.socket_timeout(block, self.replicas, conn.default_timeout))
        try:
            reply = wait.result()
        except BaseException as e:
            if e is wait._error:
                raise  # the wait's own error
            threading.Thread(target=_settle_abandoned, args=(wait, self.name), daemon=True).start()
            raise
        return reply is not None

    def release(self, count: int = 1) -> int:
        """Gives back `count` anonymous permits; returns those available."""
        return int(self._execute("SEMAPHORE.RELEASE", self.name, "COUNT", f.count_option(count)))

    def lease(self, count: int = 1, blocking: bool = True, timeout: Optional[float] = None, on_lost: Optional[Callable[[LockLost], Any]] = None) -> "Lease":
        """Leases `count` permits (waiting in the server's queue up to
        `timeout` seconds, None: as long as it takes); raises NotAcquired if
        the wait ended without them. Use it with `with`, or call
        `release()`."""
        lease = Lease(self, f.count_option(count), on_lost)
        if not lease._take(p.block_ms(blocking, timeout)):
            raise _not_acquired(f"semaphore {self.name!r}: {count} permit(s)", timeout)
        return lease


class _Wait:
    """A call on a dedicated connection, run by a thread of its own."""

    def __init__(self, conn: Dedicated, args: List[Any], timeout: Optional[float]) -> None:
        self.conn = conn
        self._done = threading.Event()
        self._reply: Any = None
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, args=(args, timeout), name="hashlock-wait", daemon=True)
        self._thread.start()

    def _run(self, args: List[Any], timeout: Optional[float]) -> None:
        try:
            self._reply = translated(self.conn.call, args, timeout)
        except ResponseError as e:
            self.conn.give_back()  # an error reply changed nothing
            self._error = e
        except BaseException as e:
            self.conn.close()
            self._error = e
        finally:
            self._done.set()

    def finished(self, timeout: Optional[float] = 0) -> bool:
        return self._done.wait(timeout)

    def result(self) -> Any:
        """The reply (the connection given back), or the call's error.
        Interruptible: an exception in this thread leaves the wait running."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        self.conn.give_back()
        return self._reply


def _settle_abandoned(wait: _Wait, name: Any) -> None:
    """An anonymous SEMAPHORE.ACQUIRE wait abandoned on the client: unblock
    it on the server (again, until its answer comes: the UNBLOCK may
    overtake the wait), then give back what it was granted. (Anonymous
    permits cannot be tied to a connection: closing it would not give them
    back.)"""
    conn = wait.conn
    cid = getattr(conn._conn, "_hashlock_id", None)
    if cid is not None and not wait.finished():
        helper = Dedicated(conn.pool, conn.address)
        try:
            for _ in range(100):
                helper.call(["CLIENT", "UNBLOCK", cid], 5)
                if wait.finished(0.1):
                    break
            helper.give_back()
        except BaseException:
            helper.close()
    if not wait.finished(None if cid is not None else 0):
        conn.close()  # no answer: closing drops the waiter
        return
    if wait._error is not None:
        return
    if wait._reply is not None:
        try:
            conn.call(["SEMAPHORE.RELEASE", name, "COUNT", int(wait._reply)], 5)
        except BaseException:
            conn.close()
            return
    conn.give_back()


class Lease(Tenure):
    """Leased permits of a Semaphore: `ids` (32 hex chars each). Returned by
    release(), by leaving a `with` block (normally, by an error, or by an
    interruption), and by the server if the connection they are tied to
    closes (keepalive) or their lease lapses (keepalive=False, watchdog
    stopped). `lost` / `on_lost`: they were returned without release()
    (their connection closed, a lapse, someone returned them)."""

    _what = "semaphore lease"

    def __init__(self, semaphore: Semaphore, count: int, on_lost: Optional[Callable[[LockLost], Any]]) -> None:
        super().__init__(semaphore._client, semaphore.name, semaphore.lease_ms, semaphore.keepalive, semaphore.replicas, on_lost)
        self.semaphore = semaphore
        self.count = count
        self.ids: List[str] = []

    def _describe(self) -> str:
        return f"lease of {self.count} permit(s) of semaphore {self._key!r}"

    def _take(self, block: Optional[int]) -> bool:
        args = f.sem_lease_args(self._key, self.count, self.lease_ms, True, block, self.replicas)
        ids = self._wait(args, block, f.parse_ids)
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

    def release(self) -> int:
        """Returns the permits; returns how many. LockLost if some were not
        leased any more (the others are returned all the same)."""
        ids = list(self.ids)
        if not ids:
            raise self._lost or self._lost_error("already returned")
        try:
            n = int(self._call(["SEMAPHORE.RETURN", self._key, *ids]))
        except LockLost as lost:
            # Some id lapsed: RETURN changed nothing; return the others.
            for i in ids:
                try:
                    self._call(["SEMAPHORE.RETURN", self._key, i])
                except (LockLost, ResponseError):
                    pass
            self._stop(lost)
            raise
        self._stop(None)
        return n

    def renew(self) -> None:
        """Sets every permit's lease to lease_ms from now; LockLost if one is gone."""
        for cmd in self._renew_cmds(self.keepalive and self._tied is not None):
            if not int(self._call(cmd)):
                lost = self._lost_error(f"{cmd[0]} found it gone")
                self._stop(lost)
                raise lost

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.ids:
            self.release()

    def __repr__(self) -> str:
        return f"<hashlock.Lease semaphore={self._key!r} ids={self.ids!r}>"


# -- latches ------------------------------------------------------------------


class Latch:
    """A count-down latch at `name` (LATCH.*; Redisson's RCountDownLatch).
    wait() queues in the server and is answered the moment the latch opens
    (whatever opens it)."""

    def __init__(self, client: Any, name: Any) -> None:
        self._client = client
        self.name = name

    def _execute(self, *args: Any) -> Any:
        return translated(self._client.execute_command, *args)

    def create(self, count: int) -> bool:
        """Sets the count if no latch exists (True), else changes nothing."""
        if int(count) < 1:
            raise ValueError("count must be >= 1")
        return bool(self._execute("LATCH.CREATE", self.name, int(count)))

    def count_down(self) -> int:
        """Counts down once; returns the count left (0: open)."""
        return int(self._execute("LATCH.COUNTDOWN", self.name))

    def count(self) -> int:
        return int(self._execute("LATCH.COUNT", self.name))

    def wait(self, timeout: Optional[float] = None) -> bool:
        """True once the latch is open; False if `timeout` seconds passed
        first (None: wait as long as it takes). An interrupted wait closes
        its connection (the server drops the waiter)."""
        if timeout is not None and timeout <= 0:
            return self._execute("LATCH.AWAIT", self.name) is not None
        block = p.block_ms(True, timeout)
        pool, address = pool_for(self._client, self.name)
        conn = Dedicated(pool, address)
        try:
            reply = translated(conn.call, ["LATCH.AWAIT", self.name, "BLOCK", block], p.socket_timeout(block, None, conn.default_timeout))
        except ResponseError:
            conn.give_back()
            raise
        except BaseException:
            conn.close()
            raise
        conn.give_back()
        return reply is not None


# -- read-write locks ---------------------------------------------------------


class _Hold:
    """One read or write hold (a context manager); release() gives it back."""

    mode = ""

    def __init__(self, rw: "ReadWriteLock", token: Optional[int] = None) -> None:
        self.rw = rw
        #: The fencing token of this write acquisition (token=True).
        self.token = token
        self.released = False

    def release(self) -> int:
        """Gives this hold back; returns the owner's holds of this mode left."""
        if self.released:
            raise LockLost(f"this {self.mode.lower()} hold of {self.rw.name!r} was already released")
        self.released = True
        return self.rw.release(self.mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.released:
            self.release()


class ReadHold(_Hold):
    mode = "READ"


class WriteHold(_Hold):
    mode = "WRITE"

    def downgrade(self) -> ReadHold:
        """Takes a read hold (granted at once: this owner writes) and gives
        this write hold back: readers may enter, no writer can come between."""
        if self.released:
            raise LockLost(f"this write hold of {self.rw.name!r} was already released")
        read = self.rw.read(blocking=False)
        self.release()
        return read


class ReadWriteLock(Tenure):
    """A read-write lock at `name` (RWLOCK.*; Redisson's RReadWriteLock):
    readers share it, a writer has it alone, and writers do not starve
    (the server queues readers behind a waiting writer). One object is one
    owner: its read and write holds are re-entrant, `write()` then `read()`
    downgrades, `read()` then `write()` raises NoUpgrade (it would
    deadlock). keepalive=True (default) ties every hold of the owner to
    one connection of the library's own (the server renews them and
    releases them if it closes); keepalive=False renews from the library.
    """

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
        self._mutex = threading.RLock()

    def _describe(self) -> str:
        return f"read-write lock {self.name!r} held by {self.owner!r}"

    def _renew_cmds(self, keepalive: bool) -> List[List[Any]]:
        return [f.with_options(["RWLOCK.RENEW", self.name, self.owner, "PX", self.lease_ms], keepalive=keepalive, replicas=self.replicas)]

    def _held(self) -> bool:
        return self._reads + self._writes > 0

    def _undo_cmds(self, got: Any) -> List[List[Any]]:
        return [["RWLOCK.RELEASE", self.name, self.owner, self._asked]]

    def _forget(self) -> None:
        self._reads = self._writes = 0

    @property
    def read_holds(self) -> int:
        return self._reads

    @property
    def write_holds(self) -> int:
        return self._writes

    def acquire(self, mode: str, blocking: bool = True, timeout: Optional[float] = None) -> Any:
        """Takes a READ or WRITE hold: the hold count of that mode (with
        token=True and WRITE: (count, token)), or None if the wait ended
        without it. NoUpgrade: WRITE while holding only READ."""
        mode = mode.upper()
        if mode not in ("READ", "WRITE"):
            raise ValueError("mode must be 'READ' or 'WRITE'")
        token = self.use_token and mode == "WRITE"
        block = p.block_ms(blocking, timeout)
        with self._mutex:
            if self._held():
                # Re-entry, downgrade (or NOUPGRADE): answered at once.
                args = f.rw_acquire_args(self.name, self.owner, mode, self.lease_ms, self.keepalive and self._tied is not None, token, None, self.replicas)
                reply = self._call(args)
                count, tok = p.parse_acquire(reply, token)
                expected = (self._writes if mode == "WRITE" else self._reads) + 1
                if count != expected:
                    if count is not None:
                        try:
                            self._client.execute_command("RWLOCK.RELEASE", self.name, self.owner, mode)
                        except Exception:
                            pass
                    lost = self._lost_error("a re-entry found it gone")
                    self._stop(lost)
                    raise lost
            else:
                args = f.rw_acquire_args(self.name, self.owner, mode, self.lease_ms, True, token, block, self.replicas)
                self._asked = mode
                got = self._wait(args, block, lambda reply: None if reply is None else p.parse_acquire(reply, token))
                if got is None:
                    return None
                count, tok = got
            if mode == "WRITE":
                self._writes = count
            else:
                self._reads = count
            return (count, tok) if token else count

    def release(self, mode: str) -> int:
        """Drops one hold of `mode`; returns the holds of that mode left.
        LockLost if this owner holds none (any more)."""
        mode = mode.upper()
        with self._mutex:
            try:
                left = int(self._call(["RWLOCK.RELEASE", self.name, self.owner, mode]))
            except LockLost as lost:
                if self._held():
                    self._stop(lost)
                raise
            if mode == "WRITE":
                self._writes = left
            else:
                self._reads = left
            if not self._held():
                self._stop(None)
            return left

    def read(self, blocking: bool = True, timeout: Optional[float] = None) -> ReadHold:
        """A read hold (use with `with`); NotAcquired if the wait ended without it."""
        if self.acquire("READ", blocking, timeout) is None:
            raise _not_acquired(f"read-write lock {self.name!r}: READ", timeout)
        return ReadHold(self)

    def write(self, blocking: bool = True, timeout: Optional[float] = None) -> WriteHold:
        """A write hold (use with `with`; `.token` with token=True);
        NotAcquired if the wait ended without it; NoUpgrade if this owner
        holds READ only."""
        got = self.acquire("WRITE", blocking, timeout)
        if got is None:
            raise _not_acquired(f"read-write lock {self.name!r}: WRITE", timeout)
        return WriteHold(self, got[1] if self.use_token else None)

    def renew(self) -> None:
        with self._mutex:
            if not int(self._call(self._renew_cmds(self.keepalive and self._tied is not None)[0])):
                lost = self._lost_error("RWLOCK.RENEW found it gone")
                self._stop(lost)
                raise lost

    def info(self) -> Optional[f.RWLockInfo]:
        return f.parse_rwlock_info(translated(self._client.execute_command, "RWLOCK.INFO", self.name))

    def __repr__(self) -> str:
        return f"<hashlock.ReadWriteLock name={self.name!r} owner={self.owner!r} read={self._reads} write={self._writes}>"


# -- multi-key locks ----------------------------------------------------------


class MultiLock(Tenure):
    """Several locks taken all at once or not at all (LOCK.MACQUIRE /
    LOCK.MRELEASE): no partial hold, no deadlock, one arrival order across
    the keys. Each key is an ordinary lock (Redisson's RLock layout). In a
    cluster the names must share a slot (a hash tag), else CrossSlot."""

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
        self._mutex = threading.RLock()

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

    def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """Takes every lock at once (or re-enters them all); False if the
        wait ended without them (then none was taken)."""
        block = p.block_ms(blocking, timeout)
        with self._mutex:
            if self._holds > 0:
                args = f.macquire_args(self.names, self.owner, self.lease_ms, self.keepalive and self._tied is not None, None, self.replicas)
                reply = self._call(args)
                counts = None if reply is None else [int(c) for c in reply]
                if counts is None or any(c != self._holds + 1 for c in counts):
                    if counts is not None:
                        try:
                            self._call(f.mrelease_args(self.names, self.owner))
                        except Exception:
                            pass
                    lost = self._lost_error("a re-entry found it gone")
                    self._stop(lost)
                    raise lost
                self._holds += 1
                return True
            args = f.macquire_args(self.names, self.owner, self.lease_ms, True, block, self.replicas)
            counts = self._wait(args, block, lambda reply: None if reply is None else [int(c) for c in reply])
            if counts is None:
                return False
            self._holds = min(counts)
            return True

    def release(self) -> int:
        """Drops one hold of every lock; returns the holds left (0: all free).
        LockLost if this owner does not hold every one (nothing changed)."""
        with self._mutex:
            try:
                left = [int(c) for c in self._call(f.mrelease_args(self.names, self.owner))]
            except LockLost as lost:
                if self._holds:
                    self._stop(lost)
                raise
            self._holds = max(left) if left else 0
            if self._holds == 0:
                self._stop(None)
            return self._holds

    def __enter__(self) -> "MultiLock":
        if not self.acquire():
            raise _not_acquired(f"multi-key lock {self.names!r}", None)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<hashlock.MultiLock names={self.names!r} owner={self.owner!r} holds={self._holds}>"


# -- leader election ----------------------------------------------------------


class Election:
    """Leader election on the lock `name`: campaign() waits in the server's
    queue (LOCK.ACQUIRE ... KEEPALIVE BLOCK TOKEN) and returns the term
    (the fencing token of the winning acquisition: it grows with every
    leader, so a resource can refuse an old leader's writes). The leader's
    lease is tied to its connection: a leader that dies is replaced at
    once by the next candidate in the queue.

    `on_elected(term)` runs when campaign() wins; `on_revoked(err)` when
    the leadership is lost without resign() (its connection closed, a
    FORCERELEASE, an expiry): at once where the server sends lifecycle
    events, and on the connection's end in any case. observe() follows
    who leads, from the events.
    """

    def __init__(
        self,
        client: Any,
        name: Any,
        owner: Optional[str] = None,
        lease_ms: int = p.DEFAULT_LEASE_MS,
        on_elected: Optional[Callable[[int], Any]] = None,
        on_revoked: Optional[Callable[[LockLost], Any]] = None,
    ) -> None:
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
        """The term won by the last campaign (while leading)."""
        return self._lock.token if self.is_leader else None

    @property
    def is_leader(self) -> bool:
        """True while this candidate leads, as far as it knows (turns False
        as soon as the loss is seen: see on_revoked)."""
        return self._lock.holds > 0 and not self._lock.lost

    def _revoked(self, err: LockLost) -> None:
        if self.on_revoked is not None:
            self.on_revoked(err)

    def campaign(self, timeout: Optional[float] = None) -> int:
        """Waits to lead (up to `timeout` seconds; None: as long as it
        takes) and returns the term. NotAcquired if the wait ended first.
        Already leading: returns the current term."""
        if self.is_leader:
            return self._lock.token  # type: ignore[return-value]
        if not self._lock.acquire(timeout=timeout):
            raise _not_acquired(f"election {self.name!r}", timeout)
        term = self._lock.token
        if self.on_elected is not None:
            self.on_elected(term)
        return term  # type: ignore[return-value]

    def resign(self) -> None:
        """Stops leading (the next candidate is elected at once)."""
        while self._lock.holds > 0:
            self._lock.release()

    def leader(self) -> Optional[f.Leader]:
        """Who leads now, and in which term; None when no one does."""
        info = self._lock.info()
        if info is None:
            return None
        return f.Leader(info.owner, int(info.token or 0))

    def observe(self, callback: Optional[Callable[[f.LeaderChange], Any]] = None) -> "Observer":
        """Follows who leads, from lifecycle events (never polling): an
        Observer to iterate (`for change in election.observe(): ...`) or,
        with `callback`, one that calls it from a thread of its own. The
        first change reported is the current state. EventsDisabled at once
        if the server's notify-keyspace-events does not deliver the events."""
        return Observer(self, callback)


class Observer:
    """Changes of leader in the order they happened (LeaderChange): each new
    leader ('elected', with its term: terms only grow) and each end of a
    leadership ('vacant'). A thread of its own turns each event into changes
    as it arrives (LOCK.INFO tells who leads then); changes closer together
    than that round trip may be reported as one (the terms show it).
    Iterate it, or give observe() a callback. close() (or leaving a `with`
    block) stops it."""

    def __init__(self, election: Election, callback: Optional[Callable[[f.LeaderChange], Any]]) -> None:
        self._election = election
        self._events: "queue.Queue[str]" = queue.Queue()
        self._changes: "queue.Queue[Optional[f.LeaderChange]]" = queue.Queue()
        self._callback = callback
        self._last: Optional[f.Leader] = None
        self._closed = False
        self._hub, self._channel = _events.hub_for(election._client, election.name)
        self._hub.refresh_flags()
        flags = self._hub.flags()
        if flags is not None and not f.hears_lifecycle_events(flags):
            raise EventsDisabled(f.events_disabled_message(flags))
        self._sub = self._hub.subscribe(self._channel, self._events.put)
        self._events.put("(start)")
        self._thread = threading.Thread(target=self._run, name="hashlock-observer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            event = self._events.get()
            if self._closed:
                break
            try:
                changes = self._advance(event)
            except Exception:
                # The server could not be asked: try again with the next event
                # (or, if none comes, in a moment).
                time.sleep(0.1)
                self._events.put("(retry)")
                continue
            for change in changes:
                if self._callback is not None:
                    try:
                        self._callback(change)
                    except Exception:
                        pass
                else:
                    self._changes.put(change)
        self._changes.put(None)

    def _advance(self, event: str) -> List[f.LeaderChange]:
        if event == "":
            # The subscriber connection ended: subscribe again, then look.
            if not self._closed:
                self._sub = self._hub.subscribe(self._channel, self._events.put)
            event = "(resubscribed)"
        now = self._election.leader()
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

    def next(self, timeout: Optional[float] = None) -> Optional[f.LeaderChange]:
        """The next change, waiting up to `timeout` seconds (None: as long
        as it takes); None on timeout or once closed."""
        try:
            return self._changes.get(timeout=timeout)
        except queue.Empty:
            return None

    def __iter__(self) -> Iterator[f.LeaderChange]:
        while True:
            change = self.next()
            if change is None:
                return
            yield change

    def close(self) -> None:
        self._closed = True
        self._sub.close()
        self._events.put("(closed)")

    def __enter__(self) -> "Observer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
