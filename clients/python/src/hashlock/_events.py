"""Lifecycle keyspace events (sync): one subscriber connection per node and
user client, shared by every watcher of a key there.

The module fires a keyspace event of class `d` on every change of holder
(`lock.acquired`, `lock.released`, `lock.expired`, `lock.forced`,
`lock.closed`, and the `rwlock.*`, `semaphore.*`, `latch.opened`
families), on `__keyspace@<db>__:<key>`, in the order things happened.
A holder's loss watch hears of a forced release, an expiry or an eviction
as it happens; an Election observer hears of every change of leader. No
polling: a thread per subscriber connection blocks on its socket.

Whether the server sends them at all is `notify-keyspace-events` (needs K
and d): `flags()` reads it once per node, so a library that needs the
events can say so at once instead of waiting for events that never come.

Nothing here knows about locks.
"""

import threading
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from redis.exceptions import ConnectionError, ResponseError

from . import _family as f
from ._connection import Address, ConnectionPool, Dedicated, pool_for

Callback = Callable[[str], None]


def db_of(client: Any, name: Any) -> int:
    get_node = getattr(client, "get_node_from_key", None)
    if get_node is not None:
        return 0  # a cluster has database 0 only
    return int(client.connection_pool.connection_kwargs.get("db", 0) or 0)


class Subscription:
    """One callback on one channel; close() ends it."""

    def __init__(self, hub: "Hub", channel: bytes, callback: Callback) -> None:
        self.hub = hub
        self.channel = channel
        self.callback = callback

    def close(self) -> None:
        self.hub.unsubscribe(self)


class Hub:
    """A subscriber connection to one node, and the thread reading it."""

    def __init__(self, pool: ConnectionPool, address: Address) -> None:
        # Weak: the hub lives as long as its user client's pool (whose end
        # closes the subscriber connection, ending the thread).
        self._pool_ref = weakref.ref(pool)
        weakref.finalize(pool, Hub._close_conn, self)
        self._address = address
        self._mutex = threading.Lock()
        self._subs: Dict[bytes, List[Subscription]] = {}
        # Channels whose SUBSCRIBE the server confirmed, and who waits for it.
        self._confirmed: Dict[bytes, threading.Event] = {}
        self._conn: Any = None
        self._thread: Optional[threading.Thread] = None
        self._flags: Optional[str] = None

    @property
    def _pool(self) -> ConnectionPool:
        pool = self._pool_ref()
        if pool is None:
            raise ConnectionError("the client this subscriber served is gone")
        return pool

    @staticmethod
    def _close_conn(hub: "Hub") -> None:
        conn, hub._conn = hub._conn, None
        if conn is not None:
            ConnectionPool.discard(conn)

    def flags(self) -> Optional[str]:
        """The node's notify-keyspace-events (None: CONFIG GET refused)."""
        if self._flags is None:
            conn = Dedicated(self._pool, self._address)
            try:
                reply = conn.call(["CONFIG", "GET", "notify-keyspace-events"], 5.0)
            except ResponseError:
                conn.give_back()
                return None
            except BaseException:
                conn.close()
                raise
            conn.give_back()
            if isinstance(reply, dict):
                values = list(reply.values())
            else:
                values = list(reply)[1::2]
            if not values:
                return None
            v = values[0]
            self._flags = v.decode() if isinstance(v, bytes) else str(v)
        return self._flags

    def refresh_flags(self) -> None:
        self._flags = None

    def subscribe(self, channel: bytes, callback: Callback, wait: bool = True) -> Subscription:
        """Calls `callback(event)` for every message on `channel` until the
        subscription is closed. wait: returns once the server confirmed it
        (events after that are delivered)."""
        sub = Subscription(self, channel, callback)
        with self._mutex:
            self._start()
            subs = self._subs.setdefault(channel, [])
            subs.append(sub)
            first = len(subs) == 1
            if first:
                confirmed = self._confirmed[channel] = threading.Event()
            else:
                confirmed = self._confirmed.get(channel) or threading.Event()
            if first:
                self._send("SUBSCRIBE", channel)
        if wait:
            confirmed.wait(10)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._mutex:
            subs = self._subs.get(sub.channel)
            if not subs or sub not in subs:
                return
            subs.remove(sub)
            if not subs:
                del self._subs[sub.channel]
                self._confirmed.pop(sub.channel, None)
                self._send("UNSUBSCRIBE", sub.channel)

    def _start(self) -> None:
        if self._conn is not None and self._thread is not None and self._thread.is_alive():
            return
        # No timeout: a subscriber waits for messages as long as it takes.
        conn = self._pool.open(self._address, socket_timeout=None)
        self._conn = conn
        self._thread = threading.Thread(target=self._run, args=(conn,), name="hashlock-events", daemon=True)
        self._thread.start()

    def _send(self, *args: Any) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            conn.send_packed_command(conn.pack_command(*args), check_health=False)
        except Exception:
            pass  # the reader sees the connection end and starts over

    def _run(self, conn: Any) -> None:
        while True:
            try:
                # push_request: RESP3 messages are pushes, returned like RESP2's arrays.
                msg = conn.read_response(disconnect_on_error=False, push_request=True)
            except Exception:
                break
            if not isinstance(msg, (list, tuple)) or len(msg) < 3:
                continue
            kind = msg[0].decode() if isinstance(msg[0], bytes) else str(msg[0])
            channel = msg[1] if isinstance(msg[1], bytes) else str(msg[1]).encode()
            if kind == "subscribe":
                with self._mutex:
                    ev = self._confirmed.get(channel)
                if ev is not None:
                    ev.set()
                continue
            if kind != "message":
                continue
            event = msg[2].decode("utf-8", "replace") if isinstance(msg[2], bytes) else str(msg[2])
            with self._mutex:
                subs = list(self._subs.get(channel, ()))
            for sub in subs:
                try:
                    sub.callback(event)
                except Exception:
                    pass
        # The connection ended: every subscriber is told (event ""), and the
        # next subscribe opens a new one.
        ConnectionPool.discard(conn)
        with self._mutex:
            if self._conn is conn:
                self._conn = None
            subs = [s for group in self._subs.values() for s in group]
            self._subs.clear()
            for ev in self._confirmed.values():
                ev.set()
            self._confirmed.clear()
        for sub in subs:
            try:
                sub.callback("")
            except Exception:
                pass


_HUBS: "weakref.WeakKeyDictionary[ConnectionPool, Dict[Address, Hub]]" = weakref.WeakKeyDictionary()
_HUBS_MUTEX = threading.Lock()


def hub_for(client: Any, name: Any) -> Tuple[Hub, bytes]:
    """The hub of the node serving `name`, and the key's keyspace channel."""
    pool, address = pool_for(client, name)
    with _HUBS_MUTEX:
        hubs = _HUBS.setdefault(pool, {})
        hub = hubs.get(address)
        if hub is None:
            hub = hubs[address] = Hub(pool, address)
    return hub, f.keyspace_channel(db_of(client, name), name)


def follow(client: Any, name: Any, callback: Callback) -> Optional[Subscription]:
    """Events on `name` for a loss watch: None when the server does not send
    them (the watch's periodic check remains) or cannot be asked."""
    try:
        hub, channel = hub_for(client, name)
        flags = hub.flags()
        if flags is not None and not f.hears_lifecycle_events(flags):
            return None
        return hub.subscribe(channel, callback, wait=False)
    except Exception:
        return None
