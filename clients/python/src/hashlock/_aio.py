"""The asyncio twins of _connection.py and _watch.py: a pool of dedicated
connections per user client (and event loop), `Dedicated` (routes to the
key's node, follows MOVED/ASK, can be aborted from a cancelled task), and a
`Watch` task per held thing (its connection's end, a periodic check).

Nothing here knows about locks."""

import asyncio
import weakref
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple, Type

from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import AskError, MovedError

from ._connection import MAX_IDLE, MAX_REDIRECTS, Address, address_of

_CLOSED_HOOK = "_hashlock_on_close"


def _hook_close(conn: Any) -> None:
    """Makes the connection call `conn._hashlock_on_close()` (when set) the
    moment its stream ends or fails: asyncio's StreamReader is told by the
    transport (feed_eof on the server's FIN, set_exception on a reset)."""
    reader = getattr(conn, "_reader", None)
    if reader is None or getattr(reader, "_hashlock_hooked", False):
        return

    def notify() -> None:
        cb = getattr(conn, _CLOSED_HOOK, None)
        if cb is not None:
            cb()

    feed_eof, set_exception = reader.feed_eof, reader.set_exception

    def on_eof() -> None:
        feed_eof()
        notify()

    def on_exception(exc: BaseException) -> None:
        set_exception(exc)
        notify()

    reader.feed_eof = on_eof
    reader.set_exception = on_exception
    reader._hashlock_hooked = True


def _usable(conn: Any) -> bool:
    """An idle connection that is still open, with nothing unread."""
    reader = getattr(conn, "_reader", None)
    if reader is None or getattr(conn, "_writer", None) is None:
        return False
    return not reader.at_eof() and reader.exception() is None and not reader._buffer


class ConnectionPool:
    """asyncio twin of _connection.ConnectionPool (one per user client and
    event loop)."""

    def __init__(self, cls: Type, kwargs: Dict[str, Any], max_idle: int = MAX_IDLE) -> None:
        self._cls = cls
        self._kwargs = dict(kwargs)
        self._kwargs.update(retry=Retry(NoBackoff(), 0), retry_on_timeout=False, retry_on_error=[])
        self.default_timeout: Optional[float] = kwargs.get("socket_timeout")
        self.max_idle = max_idle
        self._idle: Dict[Address, List[Any]] = {}
        self.loop = asyncio.get_running_loop()
        self.opened = 0

    async def take(self, address: Address) -> Any:
        idle = self._idle.get(address)
        while idle:
            conn = idle.pop()
            if _usable(conn):
                return conn
            self.discard(conn)
        kwargs = dict(self._kwargs)
        if address[1] == 0:
            kwargs["path"] = address[0]
        else:
            kwargs.update(host=address[0], port=address[1])
        conn = self._cls(**kwargs)
        await conn.connect()
        _hook_close(conn)
        self.opened += 1
        return conn

    def give_back(self, conn: Any, address: Address) -> None:
        setattr(conn, _CLOSED_HOOK, None)
        idle = self._idle.setdefault(address, [])
        if len(idle) < self.max_idle and _usable(conn):
            idle.append(conn)
        else:
            self.discard(conn)

    @staticmethod
    def discard(conn: Any) -> None:
        """Closes the socket now, without awaiting anything: usable while
        a task is being cancelled."""
        setattr(conn, _CLOSED_HOOK, None)
        writer = getattr(conn, "_writer", None)
        if writer is not None:
            try:
                writer.transport.abort()
            except Exception:
                pass
        try:
            conn._close()
        except Exception:
            pass

    def close(self) -> None:
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                self.discard(conn)


_POOLS: "weakref.WeakKeyDictionary[Any, ConnectionPool]" = weakref.WeakKeyDictionary()


def _node_factory(client: Any, name: Any) -> Tuple[Type, Dict[str, Any]]:
    get_node = getattr(client, "get_node_from_key", None)
    if get_node is not None:
        node = get_node(name)
        return node.connection_class, dict(node.connection_kwargs)
    pool = client.connection_pool
    return pool.connection_class, dict(pool.connection_kwargs)


async def pool_for(client: Any, name: Any) -> Tuple[ConnectionPool, Address]:
    """The library's pool for `client` on the running loop, and the address
    of the node serving `name`."""
    initialize = getattr(client, "initialize", None)
    if initialize is not None:
        await initialize()  # an asyncio RedisCluster learns its slots on first use
    cls, kwargs = _node_factory(client, name)
    address = address_of(kwargs)
    pool = _POOLS.get(client)
    if pool is None or pool.loop is not asyncio.get_running_loop():
        pool = ConnectionPool(cls, kwargs)
        _POOLS[client] = pool
    return pool, address


class Dedicated:
    """asyncio twin of _connection.Dedicated."""

    def __init__(self, pool: ConnectionPool, address: Address) -> None:
        self.pool = pool
        self.address = address
        self.default_timeout = pool.default_timeout
        self._conn: Any = None
        self._asking = False
        self.sent = False

    async def call(self, args: List[Any], timeout: Optional[float]) -> Any:
        redirects = 0
        while True:
            if self._conn is None:
                self._conn = await self.pool.take(self.address)
            conn = self._conn
            # None = no limit (redis-py: the attribute is read per call).
            conn.socket_timeout = timeout
            try:
                if self._asking:
                    await conn.send_command("ASKING")
                    await conn.read_response()
                    self._asking = False
                await conn.send_command(*args)
                self.sent = True
                return await conn.read_response()
            except (MovedError, AskError) as redirect:
                redirects += 1
                if redirects > MAX_REDIRECTS:
                    raise
                self.give_back()
                self.address = (redirect.host, int(redirect.port))
                self._asking = isinstance(redirect, AskError)
                self.sent = False

    async def client_id(self) -> int:
        """The server's CLIENT ID of this connection (asked once per connection)."""
        if self._conn is None:
            self._conn = await self.pool.take(self.address)
        conn = self._conn
        cid = getattr(conn, "_hashlock_id", None)
        if cid is None:
            conn.socket_timeout = 5.0
            await conn.send_command("CLIENT", "ID")
            cid = conn._hashlock_id = int(await conn.read_response())
        return cid

    def on_close(self, callback: Optional[Callable[[], None]]) -> None:
        """`callback` is called once if the connection ends while held."""
        if self._conn is not None:
            setattr(self._conn, _CLOSED_HOOK, callback)

    def give_back(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self.pool.give_back(conn, self.address)

    def abort(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self.pool.discard(conn)


class Watch:
    """One held thing, watched by a task: `check()` every `interval` seconds,
    `closed()` as soon as its connection ends. Both run under `mutex` and
    only while `active`; the owner takes `mutex` around its own use of the
    connection and sets `active` False when it stops holding."""

    def __init__(
        self,
        conn: Optional[Dedicated],
        interval: Optional[float],
        check: Callable[[], Awaitable[None]],
        closed: Callable[[], None],
    ) -> None:
        self.mutex = asyncio.Lock()
        self.active = True
        self._interval = interval
        self._check = check
        self._closed = closed
        self._ended = asyncio.Event()
        # An event on what it watches asked for a check now.
        self._poked = asyncio.Event()
        if conn is not None:
            conn.on_close(self._ended.set)
        self._task = asyncio.ensure_future(self._run())

    def poke(self) -> None:
        """Run the check now (a lifecycle event on what it watches)."""
        self._poked.set()

    def follow(self, conn: Dedicated) -> None:
        """The watched connection changed (a check followed MOVED)."""
        conn.on_close(self._ended.set)

    def stop(self) -> None:
        self.active = False
        task = self._task
        if task is not asyncio.current_task():
            task.cancel()

    async def _run(self) -> None:
        ended = asyncio.ensure_future(self._ended.wait())
        poked = asyncio.ensure_future(self._poked.wait())
        try:
            while self.active:
                done, _ = await asyncio.wait({ended, poked}, timeout=self._interval, return_when=asyncio.FIRST_COMPLETED)
                if not self.active:
                    return
                if ended in done:
                    if self.active:
                        self._closed()
                    return
                if poked in done:
                    self._poked.clear()
                    poked = asyncio.ensure_future(self._poked.wait())
                async with self.mutex:
                    if not self.active:
                        return
                    try:
                        await self._check()
                    except Exception:
                        pass  # tried again at its next turn
        finally:
            ended.cancel()
            poked.cancel()
