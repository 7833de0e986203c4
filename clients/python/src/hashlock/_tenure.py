"""A hold on a connection of the library's own (sync), for every primitive
but the original Lock: a semaphore lease, a read-write lock's holds, a
multi-key lock. The pieces are the Lock's (the pool's Dedicated
connections, the monitor's Watch, the typed errors), put together once:

- the wait runs on a dedicated connection and is always tied (KEEPALIVE):
  should it end on the client side (KeyboardInterrupt, an exception from a
  signal handler) the connection is closed, which takes the waiter off the
  server's queue and gives back a grant already on its way;
  keepalive=False unties it once the grant is read (a watchdog renews it);
- the hold is watched: its tied connection's end at once, lifecycle events
  on its key at once (the check runs), a check every third of the lease
  (renewal results: 0 = gone);
- calls while held go over the tied connection (the tie is the owner's);
  a clean end gives the connection back to the pool.

A subclass says which commands renew, untie and report its holds.
"""

from typing import Any, Callable, List, Optional

from redis.exceptions import ConnectionError, ResponseError, TimeoutError

from . import _events
from . import _protocol as p
from ._connection import Dedicated, pool_for
from ._family import STARTS
from ._watch import Watch, monitor
from .errors import LockLost, translate


def translated(fn, *args) -> Any:
    try:
        return fn(*args)
    except ResponseError as e:
        typed = translate(e)
        if typed is e:
            raise
        raise typed from e


class Tenure:
    """One owner's holds on one object (subclasses: Lease, ReadWriteLock,
    MultiLock)."""

    #: Words for messages ("lease", "read-write lock", ...).
    _what = "hold"

    def __init__(self, client: Any, key: Any, lease_ms: int, keepalive: bool, replicas: Any, on_lost: Optional[Callable[[LockLost], Any]]) -> None:
        if int(lease_ms) <= 0:
            raise ValueError("lease_ms must be a positive number of milliseconds")
        self._client = client
        self._key = key
        self.lease_ms = int(lease_ms)
        self.keepalive = keepalive
        self.replicas = p.replicas_option(replicas)
        #: Called (on the library's monitor thread) with a LockLost when the
        #: hold is found lost.
        self.on_lost = on_lost
        self._tied: Optional[Dedicated] = None
        self._watch: Optional[Watch] = None
        self._events: Any = None
        self._lost: Optional[LockLost] = None

    # -- what a subclass says ----------------------------------------------

    def _renew_cmds(self, keepalive: bool) -> List[List[Any]]:
        """Commands that renew (with KEEPALIVE: re-tie) every hold, each
        answering 1 while held, 0 once gone."""
        raise NotImplementedError

    def _held(self) -> bool:
        raise NotImplementedError

    def _undo_cmds(self, got: Any) -> List[List[Any]]:
        """Commands that give back a fresh grant (`got`: what _wait's parse gave)."""
        raise NotImplementedError

    def _undo(self, cmds: List[List[Any]]) -> None:
        for cmd in cmds:
            try:
                self._client.execute_command(*cmd)
            except Exception:
                pass

    def _forget(self) -> None:
        """Back to holding nothing (the counts)."""
        raise NotImplementedError

    def _describe(self) -> str:
        return f"{self._what} {self._key!r}"

    # -- state -------------------------------------------------------------

    @property
    def lost(self) -> bool:
        """True once the hold was found lost (until the next acquisition)."""
        return self._lost is not None

    @property
    def lost_reason(self) -> Optional[LockLost]:
        return self._lost

    def _lost_error(self, why: str) -> LockLost:
        return LockLost(f"{self._describe()} was lost: {why}")

    # -- waiting -----------------------------------------------------------

    def _wait(self, args: List[Any], block: Optional[int], parse: Callable[[Any], Any]) -> Any:
        """Runs a tied acquisition (`args` carry KEEPALIVE) on a connection
        of the library's own; `parse(reply)` is None when nothing was
        granted. Keeps the connection (keepalive) or unties and gives it
        back; starts the watch. Returns what parse returned."""
        pool, address = pool_for(self._client, self._key)
        conn = Dedicated(pool, address)
        try:
            got = parse(translated(conn.call, args, p.socket_timeout(block, self.replicas, conn.default_timeout)))
            if got is not None and not self.keepalive:
                try:
                    for cmd in self._renew_cmds(False):
                        untied = translated(conn.call, cmd, p.socket_timeout(None, None, conn.default_timeout))
                        if not int(untied):
                            conn.give_back()
                            raise self._lost_error("gone before the acquisition completed")
                except (ResponseError, LockLost):
                    raise
                except BaseException:
                    # Interrupted while untying: the server may have untied it
                    # already, so closing the connection may not give the
                    # grant back: give it back explicitly, before this object
                    # can acquire again (a later release by owner must not
                    # meet a newer hold).
                    self._undo(self._undo_cmds(got))
                    raise
        except ResponseError:
            conn.give_back()  # an error reply changed nothing
            raise
        except BaseException:
            conn.close()  # the server drops the waiter, and a tied grant with it
            raise
        if got is None or not self.keepalive:
            conn.give_back()
        else:
            self._tied = conn
        if got is not None:
            self._lost = None
            self._start_watch()
        return got

    # -- while held --------------------------------------------------------

    def _call(self, args: List[Any]) -> Any:
        """A call on the tied connection (under the watch's mutex), or on the
        user's client. A failed tied connection is a lost hold."""
        watch = self._watch
        tied = self._tied
        if tied is None or watch is None:
            return translated(self._client.execute_command, *args)
        with watch.mutex:
            if not watch.active or self._tied is not tied:
                raise self._lost or self._lost_error("found lost")
            try:
                return translated(tied.call, args, p.socket_timeout(None, self.replicas, tied.default_timeout))
            except (ConnectionError, TimeoutError) as e:
                lost = self._lost_error(f"its KEEPALIVE connection failed ({e})")
                self._stop(lost, close=True)
                raise lost from e
            except ResponseError:
                raise
            except BaseException:
                # Interrupted mid-call: the reply would be read by the next
                # call. Closing the connection ends every tied hold.
                self._stop(self._lost_error("a call on it was interrupted"), close=True)
                raise

    def _start_watch(self) -> None:
        if self._watch is not None and self._watch.active:
            return
        tied = self._tied
        watch = Watch(
            sock=tied.sock if tied is not None else None,
            interval=self.lease_ms / 3000,
            check=self._check,
            closed=lambda: self._lose(self._lost_error("its KEEPALIVE connection closed"), close=True),
        )
        self._watch = watch
        mon = monitor()
        mon.add(watch)
        self._events = _events.follow(self._client, self._key, lambda event: self._on_event(watch, event))

    def _on_event(self, watch: Watch, event: str) -> None:
        if event not in STARTS:
            monitor().poke(watch)

    def _check(self) -> None:
        """The monitor's check (under the watch's mutex)."""
        tied = self._tied if self.keepalive else None
        for cmd in self._renew_cmds(tied is not None):
            if tied is not None:
                try:
                    renewed = translated(tied.call, cmd, p.socket_timeout(None, self.replicas, tied.default_timeout))
                except (ConnectionError, TimeoutError, OSError) as e:
                    self._lose(self._lost_error(f"its KEEPALIVE connection failed ({e})"), close=True)
                    return
            else:
                try:
                    renewed = translated(self._client.execute_command, *cmd)
                except (ConnectionError, TimeoutError, OSError):
                    return  # transient: the lease is the safety net
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
        """Back to holding nothing: the watch ends, the tied connection goes
        back to the pool (or is closed: it failed, or closing releases)."""
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.active = False
            monitor().remove(watch)
        events, self._events = self._events, None
        if events is not None:
            events.close()
        self._forget()
        if lost is not None:
            self._lost = lost
        tied, self._tied = self._tied, None
        if tied is not None:
            if close:
                tied.close()
            else:
                tied.give_back()
