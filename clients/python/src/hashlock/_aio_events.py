"""asyncio twin of _events.py: one subscriber connection per node, user
client and event loop, read by a task; callbacks per channel."""

import asyncio
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from redis.exceptions import ResponseError

from . import _family as f
from ._aio import ConnectionPool, Dedicated, pool_for
from ._connection import Address
from ._events import db_of

Callback = Callable[[str], None]


class Subscription:
    def __init__(self, hub: "Hub", channel: bytes, callback: Callback) -> None:
        self.hub = hub
        self.channel = channel
        self.callback = callback

    def close(self) -> None:
        self.hub.unsubscribe(self)


class Hub:
    def __init__(self, pool: ConnectionPool, address: Address) -> None:
        self._pool = pool
        self._address = address
        self._subs: Dict[bytes, List[Subscription]] = {}
        self._confirmed: Dict[bytes, asyncio.Event] = {}
        self._conn: Any = None
        self._task: Optional[asyncio.Task] = None
        self._starting: Optional[asyncio.Future] = None
        self._flags: Optional[str] = None

    async def flags(self) -> Optional[str]:
        if self._flags is None:
            conn = Dedicated(self._pool, self._address)
            try:
                reply = await conn.call(["CONFIG", "GET", "notify-keyspace-events"], 5.0)
            except ResponseError:
                conn.give_back()
                return None
            except BaseException:
                conn.abort()
                raise
            conn.give_back()
            values = list(reply.values()) if isinstance(reply, dict) else list(reply)[1::2]
            if not values:
                return None
            v = values[0]
            self._flags = v.decode() if isinstance(v, bytes) else str(v)
        return self._flags

    def refresh_flags(self) -> None:
        self._flags = None

    async def subscribe(self, channel: bytes, callback: Callback, wait: bool = True) -> Subscription:
        sub = Subscription(self, channel, callback)
        await self._start()
        subs = self._subs.setdefault(channel, [])
        subs.append(sub)
        if len(subs) == 1:
            confirmed = self._confirmed[channel] = asyncio.Event()
            await self._send("SUBSCRIBE", channel)
        else:
            confirmed = self._confirmed.get(channel) or asyncio.Event()
        if wait:
            try:
                await asyncio.wait_for(confirmed.wait(), 10)
            except asyncio.TimeoutError:
                pass
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        subs = self._subs.get(sub.channel)
        if not subs or sub not in subs:
            return
        subs.remove(sub)
        if not subs:
            del self._subs[sub.channel]
            self._confirmed.pop(sub.channel, None)
            asyncio.ensure_future(self._send("UNSUBSCRIBE", sub.channel))

    async def _start(self) -> None:
        if self._conn is not None and self._task is not None and not self._task.done():
            return
        if self._starting is not None:
            await asyncio.shield(self._starting)
            return
        self._starting = asyncio.get_running_loop().create_future()
        try:
            conn = await self._pool.take(self._address)
            conn.socket_timeout = None
            self._conn = conn
            self._task = asyncio.ensure_future(self._run(conn))
        finally:
            self._starting.set_result(None)
            self._starting = None

    async def _send(self, *args: Any) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            await conn.send_packed_command(conn.pack_command(*args), check_health=False)
        except Exception:
            pass

    async def _run(self, conn: Any) -> None:
        try:
            while True:
                try:
                    msg = await conn.read_response(disconnect_on_error=False, push_request=True)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    break
                if not isinstance(msg, (list, tuple)) or len(msg) < 3:
                    continue
                kind = msg[0].decode() if isinstance(msg[0], bytes) else str(msg[0])
                channel = msg[1] if isinstance(msg[1], bytes) else str(msg[1]).encode()
                if kind == "subscribe":
                    ev = self._confirmed.get(channel)
                    if ev is not None:
                        ev.set()
                    continue
                if kind != "message":
                    continue
                event = msg[2].decode("utf-8", "replace") if isinstance(msg[2], bytes) else str(msg[2])
                for sub in list(self._subs.get(channel, ())):
                    try:
                        sub.callback(event)
                    except Exception:
                        pass
        finally:
            self._pool.discard(conn)
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


async def hub_for(client: Any, name: Any) -> Tuple[Hub, bytes]:
    pool, address = await pool_for(client, name)
    hubs = _HUBS.setdefault(pool, {})
    hub = hubs.get(address)
    if hub is None:
        hub = hubs[address] = Hub(pool, address)
    return hub, f.keyspace_channel(db_of(client, name), name)


async def follow(client: Any, name: Any, callback: Callback) -> Optional[Subscription]:
    try:
        hub, channel = await hub_for(client, name)
        flags = await hub.flags()
        if flags is not None and not f.hears_lifecycle_events(flags):
            return None
        return await hub.subscribe(channel, callback, wait=False)
    except Exception:
        return None


class Follower:
    """follow() started from synchronous code (a watch starting): the
    subscription arrives later; close() ends it whenever it arrives."""

    def __init__(self, client: Any, name: Any, callback: Callback) -> None:
        self._closed = False
        self._sub: Optional[Subscription] = None
        self._task = asyncio.ensure_future(self._start(client, name, callback))

    async def _start(self, client: Any, name: Any, callback: Callback) -> None:
        sub = await follow(client, name, callback)
        if self._closed:
            if sub is not None:
                sub.close()
        else:
            self._sub = sub

    def close(self) -> None:
        self._closed = True
        if self._sub is not None:
            self._sub.close()
            self._sub = None
