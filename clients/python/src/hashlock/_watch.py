"""Loss detection (sync): one daemon thread per process watches every held
lock and reports a lost one as soon as it can tell.

What it watches, per hold (a `Watch`):
- the hold's own connection, when the lock is tied to it (KEEPALIVE): the
  server ties the lock to that connection, so the connection closing
  (CLIENT KILL, the server's `timeout`, a shutdown, a reset) means the lock
  is gone. An idle connection that turns readable has been closed (or the
  server wrote an error before closing it): lost, at once.
- a periodic check every third of the lease, whose result says whether the
  lock is still held: the watchdog's LOCK.RENEW (keepalive=False), or
  LOCK.RENEW ... KEEPALIVE on the tied connection (which also re-ties a lock
  whose tie did not follow it: failover, slot migration). 0 means the lock
  is gone (FORCERELEASE, a lapsed lease, a failover that lost it).

Lifecycle keyspace events (`lock.*`, class `d`) will be a third source: a
Watch then reacts to an event for its key the way it reacts to a due check.

Nothing here knows about locks: a Watch is a socket (or None), an interval
and two callbacks, for any primitive.
"""

import os
import select
import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, Optional


#: The longest the monitor sleeps without looking at the clock.
IDLE_S = 1.0
#: Threads running checks.
CHECK_THREADS = 4


class Watch:
    """One held thing to watch. `check()` runs every `interval` seconds (None:
    never) and `closed()` when `sock` turns readable while idle; both run on
    the monitor thread, under `mutex`, only while `active`. The owner takes
    `mutex` around its own use of the connection and sets `active` False
    (under `mutex`) when it stops holding."""

    def __init__(
        self,
        sock: Optional[socket.socket],
        interval: Optional[float],
        check: Callable[[], None],
        closed: Callable[[], None],
    ) -> None:
        self.sock = sock
        self.interval = interval
        self.check = check
        self.closed = closed
        self.mutex = threading.RLock()
        self.active = True
        # A check is running (off the monitor thread): the next waits for it.
        self.checking = False
        # An event asked for a check now.
        self.poked = False
        self.due = time.monotonic() + interval if interval else None


def _peek_closed(sock: socket.socket) -> bool:
    """True if an idle socket that select() reported readable is closed, was
    reset, or holds bytes nobody asked for (an error the server sent before
    closing it)."""
    try:
        sock.settimeout(0)  # the owner sets its own timeout with every call
        data = sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return False
    except OSError:
        return True
    # b"": closed; anything else: bytes nobody asked for. Either way the
    # connection is done.
    return data is not None


class Monitor:
    """The process's watcher thread (started on first use)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._watches: Dict[int, Watch] = {}
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread: Optional[threading.Thread] = None
        self._pid = os.getpid()
        # Checks do network I/O (a call can take its full timeout on a dead
        # server): they run here, so that one slow check delays neither the
        # others nor the reaction to a closed connection.
        self._checks = ThreadPoolExecutor(max_workers=CHECK_THREADS, thread_name_prefix="hashlock-check")
        # When the thread will look at the clock next (it never sleeps
        # longer than IDLE_S): add() wakes it only for an earlier due time.
        self._next_wake = 0.0

    def add(self, watch: Watch) -> None:
        # A socket registered while the thread waits is watched at once
        # (epoll); only an earlier due time needs the thread awake.
        with self._mutex:
            self._watches[id(watch)] = watch
            if watch.sock is not None:
                try:
                    self._selector.register(watch.sock, selectors.EVENT_READ, watch)
                except (KeyError, ValueError, OSError):
                    pass
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="hashlock-monitor", daemon=True)
                self._thread.start()
            wake = watch.due is not None and watch.due < self._next_wake
        if wake:
            self._wake()

    def remove(self, watch: Watch) -> None:
        # No wake-up: a removed watch is simply not found at its due time.
        with self._mutex:
            self._watches.pop(id(watch), None)
            if watch.sock is not None:
                try:
                    self._selector.unregister(watch.sock)
                except (KeyError, ValueError, OSError):
                    pass

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except (BlockingIOError, OSError):
            pass

    def _run(self) -> None:
        while True:
            with self._mutex:
                watches = list(self._watches.values())
                now = time.monotonic()
                dues = [
                    now if w.poked else w.due
                    for w in watches
                    if (w.due is not None or w.poked) and not w.checking
                ]
                timeout = min(IDLE_S, max(0.0, min(dues) - now)) if dues else IDLE_S
                self._next_wake = now + timeout
            try:
                events = self._selector.select(timeout)
            except (OSError, ValueError):
                events = []
                time.sleep(0.01)
            for key, _ in events:
                if key.data is None:
                    try:
                        while os.read(self._wake_r, 512):
                            pass
                    except (BlockingIOError, OSError):
                        pass
                    continue
                self._readable(key.data)
            now = time.monotonic()
            for w in watches:
                if ((w.due is not None and w.due <= now) or w.poked) and not w.checking:
                    w.poked = False
                    w.due = now + w.interval if w.interval else None
                    w.checking = True
                    try:
                        self._checks.submit(self._check, w)
                    except RuntimeError:
                        return  # the interpreter is exiting: no checks any more

    def _check(self, w: Watch) -> None:
        try:
            self._guarded(w, w.check)
        finally:
            w.checking = False
            # The thread left this watch out of its sleep while it was
            # checked: it computes its next due time again.
            self._wake()

    def poke(self, watch: Watch) -> None:
        """Run `watch`'s check now (an event on what it watches)."""
        with self._mutex:
            if id(watch) not in self._watches:
                return
            watch.poked = True
        self._wake()

    def _readable(self, w: Watch) -> None:
        # Readable while idle: the owner is not using the connection (it
        # would hold the mutex; its reply would be consumed by then).
        with w.mutex:
            if not w.active or w.sock is None:
                return
            try:
                ready = bool(select.select([w.sock], [], [], 0)[0])
            except (OSError, ValueError):
                ready = True
            if not ready or not _peek_closed(w.sock):
                return
        self.remove(w)
        self._guarded(w, w.closed)

    def _guarded(self, w: Watch, fn: Callable[[], None]) -> None:
        with w.mutex:
            if not w.active:
                return
            try:
                fn()
            except Exception:
                pass  # a check that failed is tried again at its next turn
        if not w.active:
            self.remove(w)


_MONITOR: Optional[Monitor] = None
_MONITOR_MUTEX = threading.Lock()


def monitor() -> Monitor:
    """The process's monitor (a new one after a fork)."""
    global _MONITOR
    with _MONITOR_MUTEX:
        if _MONITOR is None or _MONITOR._pid != os.getpid():
            _MONITOR = Monitor()
        return _MONITOR
