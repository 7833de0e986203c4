"""hashlock.Lock: the lock object for redis.Redis and redis.RedisCluster."""

from typing import Any, Optional

from redis.exceptions import ConnectionError, ResponseError, TimeoutError

from . import _protocol as p
from . import _events
from ._base import LockBase
from ._family import STARTS
from ._connection import Dedicated, pool_for
from ._watch import Watch, monitor
from .errors import LockLost, NotAcquired, translate


class Lock(LockBase):
    """A reentrant lock on `name`, shared with every LOCK.* and Redisson
    client. One Lock object is one owner: give each thread (or process) its
    own Lock object, as Redisson gives each thread its own owner id.

    keepalive=True (the default) ties the lock to a connection of the
    library's own, and the server renews the lease while that connection is
    open and releases the lock the moment it closes (process killed, network
    gone). keepalive=False renews the lease from the library every third of
    it instead (a watchdog).

    Either way the library's monitor thread watches the held lock and sets
    `lost` (and calls `on_lost`) as soon as it finds it gone: at once when
    its KEEPALIVE connection closes; at once on a FORCERELEASE, a lapsed
    lease or an eviction where the server sends lifecycle events
    (notify-keyspace-events with K and d); otherwise at the check every
    third of the lease (also what finds a failover that lost it).
    """

    # -- acquiring ---------------------------------------------------------

    def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """Takes the lock, or re-enters it if this object holds it.

        blocking=False answers at once. blocking=True waits in the server's
        FIFO queue: up to `timeout` seconds, or forever when timeout is None.
        Returns True when held, False when the wait ended without the lock.
        """
        block = p.block_ms(blocking, timeout)
        self._acknowledge_loss()
        if self._holds > 0:
            return self._reenter()
        if self.keepalive or block is not None:
            count = self._acquire_dedicated(block)
        else:
            count = self._take(self._execute(self._acquire_args(None)))
        if count is None:
            return False
        self._holds = count
        self._lost = None
        self._start_watch()
        return True

    def _acquire_dedicated(self, block: Optional[int]) -> Optional[int]:
        """An acquire on a connection of the library's own. It is always
        tied (KEEPALIVE): should the wait end on the client side, closing the
        connection takes its queue entry off the server and releases a grant
        that was already on its way. keepalive=False unties it once the
        grant is read; a connection that ends holding nothing goes back to
        the pool."""
        pool, address = pool_for(self._client, self.name)
        conn = Dedicated(pool, address)
        try:
            reply = self._translated(
                conn.call,
                self._acquire_args(block, keepalive=True),
                p.socket_timeout(block, self.replicas, conn.default_timeout),
            )
            count = self._take(reply)
            if count is not None and not self.keepalive:
                untied = self._translated(
                    conn.call,
                    p.untie_args(self.name, self.owner, self.lease_ms),
                    p.socket_timeout(None, None, conn.default_timeout),
                )
                if not int(untied):
                    conn.give_back()
                    raise self._lost_error("gone before the acquisition completed")
        except ResponseError:
            # An error reply changed nothing; the connection is clean.
            conn.give_back()
            raise
        except BaseException:
            conn.close()
            raise
        if count is None or not self.keepalive:
            conn.give_back()
        else:
            self._tied = conn
        return count

    def _reenter(self) -> bool:
        args = self._acquire_args(None)
        watch = self._watch
        if self._tied is not None and watch is not None:
            with watch.mutex:
                if not watch.active:
                    raise self._lost or self._lost_error("found lost")
                try:
                    reply = self._on_tied(args)
                except LockLost as lost:
                    self._stop(lost, close=True)
                    raise
        else:
            reply = self._execute(args)
        count = self._take(reply)
        if count == self._holds + 1:
            self._holds = count
            return True
        # Our holds were lost meanwhile (lease ran out, force release): the
        # section they protect is compromised; say so.
        if count is not None:
            self._give_back_grant()
        lost = self._lost_error("re-entry found it gone")
        self._stop(lost)
        raise lost

    def _give_back_grant(self) -> None:
        """A re-entry found the lock gone and took it afresh: that new hold is
        not what the caller asked for. Give it back (NOTOWNER if none)."""
        try:
            self._client.execute_command("LOCK.RELEASE", self.name, self.owner)
        except Exception:
            pass

    # -- holding -----------------------------------------------------------

    def release(self) -> int:
        """Drops one hold; returns the holds left (0 = released). Raises
        LockLost if this owner no longer holds the lock."""
        self._unacknowledged = None
        args = ["LOCK.RELEASE", self.name, self.owner]
        watch = self._watch
        if self._tied is not None and watch is not None:
            with watch.mutex:
                if watch.active:
                    last = self._holds == 1
                    if last:
                        # Its reply would wake the monitor for nothing: the
                        # hold (normally) ends with it.
                        monitor().remove(watch)
                    left = self._release_on(args, tied=True)
                    if last and self._watch is watch and watch.active:
                        monitor().add(watch)  # still held after all
                    return left
        return self._release_on(args, tied=False)

    def _release_on(self, args, tied: bool) -> int:
        try:
            left = int(self._on_tied(args) if tied else self._execute(args))
        except LockLost as lost:
            # NOTOWNER leaves the connection clean; a failed one is closed.
            self._stop(lost, close=not isinstance(lost.__cause__, ResponseError))
            # This raise reports the loss, also if the watch found it while
            # this release waited for the watch's mutex.
            self._unacknowledged = None
            raise
        self._holds = left
        if left == 0:
            self._stop(None)
        return left

    def renew(self) -> None:
        """Sets the lease to lease_ms from now (with keepalive: re-ties the
        lock to the lock's connection, e.g. after a failover). Raises
        LockLost if this owner no longer holds the lock."""
        args = p.renew_args(self.name, self.owner, self.lease_ms, self.keepalive, self.replicas)
        watch = self._watch
        if self.keepalive and self._tied is not None and watch is not None:
            with watch.mutex:
                try:
                    renewed = self._on_tied(args) if watch.active else 0
                except LockLost as lost:
                    self._stop(lost, close=True)
                    raise
        elif self.keepalive:
            pool, address = pool_for(self._client, self.name)
            conn = Dedicated(pool, address)
            try:
                renewed = self._translated(conn.call, args, p.socket_timeout(None, self.replicas, conn.default_timeout))
            except ResponseError:
                conn.give_back()
                raise
            except BaseException:
                conn.close()
                raise
            if int(renewed):
                # Held and now tied to this connection: watch it.
                self._stop(None)
                self._tied = conn
                self._holds = max(self._holds, 1)
                self._lost = None
                self._start_watch()
            else:
                conn.give_back()
        else:
            renewed = self._execute(args)
        if not int(renewed):
            lost = self._lost_error("LOCK.RENEW found it gone")
            self._stop(lost)
            raise lost

    def locked(self) -> bool:
        """True if anyone holds the lock now."""
        return self.info() is not None

    def owned(self) -> bool:
        """True if this owner holds the lock now (asks the server)."""
        info = self.info()
        return info is not None and info.owner == self.owner

    def info(self) -> Optional[p.LockInfo]:
        """LOCK.INFO: owner, holds, ttl_ms, waiters, keepalive, token; None
        when the lock is free."""
        return p.parse_info(self._execute(["LOCK.INFO", self.name]))

    def __enter__(self) -> "Lock":
        if not self.acquire():
            raise NotAcquired(f"lock {self.name!r}: the wait ended without the lock")
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    # -- loss detection ----------------------------------------------------

    def _start_watch(self) -> None:
        if self._watch is not None and self._watch.active:
            return
        tied = self._tied
        self._watch = Watch(
            sock=tied.sock if tied is not None else None,
            interval=self._check_interval(),
            check=self._check,
            closed=lambda: self._lose(self._lost_error("its KEEPALIVE connection closed"), close=True),
        )
        watch = self._watch
        monitor().add(watch)
        # Lifecycle events on the key (where the server sends them): an
        # ending event, DEL, an expiry or an eviction runs the check at once.
        self._events = _events.follow(
            self._client, self.name, lambda event: event in STARTS or monitor().poke(watch)
        )

    def _check(self) -> None:
        """The monitor's periodic check (under the watch's mutex): keepalive
        re-ties and checks on the tied connection, the watchdog renews."""
        watch = self._watch
        if self.keepalive and self._tied is not None:
            args = p.renew_args(self.name, self.owner, self.lease_ms, True, self.replicas)
            try:
                renewed = self._translated(
                    self._tied.call, args, p.socket_timeout(None, self.replicas, self._tied.default_timeout)
                )
            except (ConnectionError, TimeoutError, OSError) as e:
                self._lose(self._lost_error(f"its KEEPALIVE connection failed ({e})"), close=True)
                return
            if watch is not None and self._tied is not None and watch.sock is not self._tied.sock:
                # The check followed a MOVED: watch the new node's connection.
                monitor().remove(watch)
                watch.sock = self._tied.sock
                monitor().add(watch)
        else:
            args = p.renew_args(self.name, self.owner, self.lease_ms, False, self.replicas)
            try:
                renewed = self._client.execute_command(*args)
            except (ConnectionError, TimeoutError, OSError):
                return  # transient: the lease is the safety net until the next try
        if not int(renewed):
            self._lose(self._lost_error("LOCK.RENEW found it gone"))

    def _lose(self, lost: LockLost, close: bool = False) -> None:
        """The held lock is gone: report it (lost, on_lost)."""
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
        """Back to not holding. The tied connection goes back to the pool (it
        holds nothing now), unless `close`: the connection itself failed."""
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.active = False
            monitor().remove(watch)
        events, self._events = self._events, None
        if events is not None:
            events.close()
        self._holds = 0
        if lost is not None:
            self._lost = lost
        tied, self._tied = self._tied, None
        if tied is not None:
            if close:
                tied.close()
            else:
                tied.give_back()

    # -- plumbing ----------------------------------------------------------

    def _execute(self, args) -> Any:
        return self._translated(self._client.execute_command, *args)

    def _on_tied(self, args) -> Any:
        conn = self._tied
        try:
            return self._translated(conn.call, args, p.socket_timeout(None, self.replicas, conn.default_timeout))
        except (ConnectionError, TimeoutError) as e:
            # The tie is the connection: without it the server has released
            # the lock (or will, once it notices).
            raise self._lost_error(f"its KEEPALIVE connection failed ({e})") from e
        except ResponseError:
            raise
        except BaseException:
            # Interrupted mid-call (KeyboardInterrupt): the reply would be read
            # by the next call. Closing the connection releases the tied lock
            # on the server (what an interrupted release wanted; for anything
            # else a loss).
            releasing = args[0] == "LOCK.RELEASE"
            self._stop(None if releasing else self._lost_error("a call on it was interrupted"), close=True)
            raise

    @staticmethod
    def _translated(fn, *args) -> Any:
        try:
            return fn(*args)
        except ResponseError as e:
            typed = translate(e)
            if typed is e:
                raise
            raise typed from e
