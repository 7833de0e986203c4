"""hashlock.Lock: the lock object for redis.Redis and redis.RedisCluster."""

import threading
from typing import Any, Optional

from redis.exceptions import ConnectionError, ResponseError, TimeoutError

from . import _protocol as p
from ._base import LockBase
from ._connection import Dedicated
from .errors import LockLost, NotAcquired, translate


class Lock(LockBase):
    """A reentrant lock on `name`, shared with every LOCK.* and Redisson
    client. One Lock object is one owner: give each thread (or process) its
    own Lock object, as Redisson gives each thread its own owner id.

    keepalive=True (the default) ties the lock to a connection of the lock's
    own, and the server renews the lease while that connection is open and
    releases the lock the moment it closes (process killed, network gone);
    no watchdog runs. keepalive=False runs a watchdog thread instead, which
    renews the lease every third of it while the lock is held.
    """

    # -- acquiring ---------------------------------------------------------

    def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """Takes the lock, or re-enters it if this object holds it.

        blocking=False answers at once. blocking=True waits in the server's
        FIFO queue: up to `timeout` seconds, or forever when timeout is None.
        Returns True when held, False when the wait ended without the lock.
        """
        block = p.block_ms(blocking, timeout)
        if self._holds > 0:
            return self._reenter()
        args = self._acquire_args(block)
        if self.keepalive:
            count = self._acquire_tied(args, block)
        elif block is None:
            count = self._acquire_pooled(args)
        else:
            count = self._acquire_waiting(args, block)
        if count is None:
            return False
        self._holds = count
        self._lost = False
        if not self.keepalive:
            self._start_watchdog()
        return True

    def _acquire_tied(self, args, block: Optional[int]) -> Optional[int]:
        conn = Dedicated(self._client, self.name)
        count = None
        try:
            count = self._take(self._translated(conn.call, args, p.socket_timeout(block, self.replicas, conn.default_timeout)))
        finally:
            # Without a grant the connection goes: closing it leaves the
            # queue. With one, it is the lock's life line.
            if count is None:
                conn.close()
        self._tied = conn
        return count

    def _acquire_pooled(self, args) -> Optional[int]:
        return self._take(self._execute(args))

    def _acquire_waiting(self, args, block: int) -> Optional[int]:
        conn = Dedicated(self._client, self.name)
        try:
            return self._take(self._translated(conn.call, args, p.socket_timeout(block, self.replicas, conn.default_timeout)))
        except BaseException:
            conn.close()
            if conn.sent:
                self._drop_unread_grant()
            raise
        finally:
            conn.close()

    def _drop_unread_grant(self) -> None:
        """The wait was abandoned after the command was sent: the server may
        have granted the lock just before the connection closed, in a reply
        nobody read. Give that hold back (NOTOWNER if there was none)."""
        try:
            self._client.execute_command("LOCK.RELEASE", self.name, self.owner)
        except Exception:
            pass

    def _reenter(self) -> bool:
        args = self._acquire_args(None)
        if self.keepalive and self._tied is not None:
            reply = self._on_tied(args)
        else:
            reply = self._execute(args)
        count = self._take(reply)
        if count == self._holds + 1:
            self._holds = count
            return True
        # Our holds were lost meanwhile (lease ran out, force release):
        # the section they protect is compromised; say so.
        if count is not None:
            self._drop_unread_grant()
        self._forget()
        raise LockLost(f"lock {self.name!r} was lost while held by {self.owner!r} (re-entry found it gone)")

    # -- holding -----------------------------------------------------------

    def release(self) -> int:
        """Drops one hold; returns the holds left (0 = released). Raises
        LockLost if this owner no longer holds the lock."""
        args = ["LOCK.RELEASE", self.name, self.owner]
        try:
            if self.keepalive and self._tied is not None:
                left = int(self._on_tied(args))
            else:
                left = int(self._execute(args))
        except LockLost:
            self._forget()
            raise
        self._holds = left
        if left == 0:
            self._forget()
        return left

    def renew(self) -> None:
        """Sets the lease to lease_ms from now (with keepalive: re-ties the
        lock to the lock's connection, e.g. after a failover). Raises
        LockLost if this owner no longer holds the lock."""
        args = p.renew_args(self.name, self.owner, self.lease_ms, self.keepalive, self.replicas)
        if self.keepalive:
            if self._tied is None:
                self._tied = Dedicated(self._client, self.name)
            renewed = self._on_tied(args)
        else:
            renewed = self._execute(args)
        if not int(renewed):
            self._forget()
            raise LockLost(f"lock {self.name!r} is not held by {self.owner!r} any more")

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
            self._forget()
            raise LockLost(f"lock {self.name!r}: its KEEPALIVE connection failed ({e})") from e

    @staticmethod
    def _translated(fn, *args) -> Any:
        try:
            return fn(*args)
        except ResponseError as e:
            typed = translate(e)
            if typed is e:
                raise
            raise typed from e

    def _forget(self) -> None:
        """Back to not holding: stop the watchdog, drop the tie."""
        self._holds = 0
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog = None
        if self._tied is not None:
            self._tied.close()
            self._tied = None

    def _start_watchdog(self) -> None:
        if self._watchdog is None:
            self._watchdog = _Watchdog(self)
            self._watchdog.start()


class _Watchdog(threading.Thread):
    """keepalive=False only: renews the lease every third of it; marks the
    lock lost (lock.lost) when LOCK.RENEW answers 0."""

    def __init__(self, lock: Lock) -> None:
        super().__init__(name=f"hashlock-watchdog-{lock.name!r}", daemon=True)
        self._lock = lock
        self._stopped = threading.Event()
        self._args = p.renew_args(lock.name, lock.owner, lock.lease_ms, False, lock.replicas)

    def stop(self) -> None:
        self._stopped.set()

    def run(self) -> None:
        interval = self._lock.lease_ms / 3000
        while not self._stopped.wait(interval):
            try:
                renewed = self._lock._client.execute_command(*self._args)
            except Exception:
                continue  # transient; the lease is the safety net until the next try
            if not int(renewed) and not self._stopped.is_set():
                self._lock._lost = True
                return
