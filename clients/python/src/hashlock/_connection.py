"""The library's own connections (sync): a pool of dedicated connections per
user client, and `Dedicated`, one call site that routes to the key's node
and follows MOVED/ASK.

Why connections of the library's own: a blocking LOCK.ACQUIRE must not share
the user's pooled connection (redis-py's socket timeout, 5 s by default,
would cut the wait short, and its retries would silently re-send the BLOCK,
losing the queue position), and a KEEPALIVE lock lives exactly as long as
the connection that took it, so that connection must be the lock's alone.
So each wait or KEEPALIVE hold takes a connection with no retries and a
socket timeout longer than BLOCK.

Why a pool: opening a TCP connection per acquisition caps a process at a
thousand or so acquisitions a second and leaves a socket in TIME_WAIT for
each. A connection whose lock was released cleanly holds nothing (no lock,
no queue entry) and is handed to the next acquisition. Only a wait that ends
on the client side (a client-side timeout, KeyboardInterrupt, task
cancellation) or a connection that failed is closed: closing is what takes
its queue entry (and any grant on its way, tied with KEEPALIVE) off the
server.

Nothing here knows about locks: the same pieces serve every primitive.
"""

import socket
import threading
import weakref
from typing import Any, Dict, List, Optional, Tuple, Type

from redis.backoff import NoBackoff
from redis.exceptions import AskError, MovedError
from redis.retry import Retry

#: MOVED/ASK redirections followed for one call (a slot moves at most a few
#: times while a client waits).
MAX_REDIRECTS = 5
#: Idle connections a pool keeps per node; more are closed when given back.
MAX_IDLE = 64

Address = Tuple[str, int]


def no_retry_settings(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    kwargs = dict(kwargs)
    kwargs.update(retry=Retry(NoBackoff(), 0), retry_on_timeout=False, retry_on_error=[])
    return kwargs


def address_of(kwargs: Dict[str, Any]) -> Address:
    return kwargs.get("path") or kwargs.get("host", "localhost"), int(kwargs.get("port", 6379) or 0)


def idle_and_open(sock: Optional[socket.socket]) -> bool:
    """True if an idle connection's socket is still usable: nothing to read
    (a server that closed it, or sent an error before closing, makes it
    readable)."""
    if sock is None:
        return False
    try:
        # Non-blocking for the peek: with a timeout set, Python would wait
        # for data first. (Every call sets its own timeout again.)
        sock.settimeout(0)
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True  # nothing to read: open and idle
    except (OSError, ValueError):
        return False
    return False


class ConnectionPool:
    """Dedicated connections for one user client: idle ones per node, handed
    out by take() and given back by give_back() when they hold nothing."""

    def __init__(self, cls: Type, kwargs: Dict[str, Any], max_idle: int = MAX_IDLE) -> None:
        self._cls = cls
        self._kwargs = no_retry_settings(kwargs)
        self.default_timeout: Optional[float] = kwargs.get("socket_timeout")
        self.max_idle = max_idle
        self._idle: Dict[Address, List[Any]] = {}
        self._mutex = threading.Lock()
        # Packed commands by their arguments: a lock sends the same few
        # commands over and over (packing costs more than the syscall).
        self._packed: Dict[Tuple[Any, ...], Any] = {}
        #: Connections this pool opened (for the benchmark's "new connections
        #: per 1000 acquisitions").
        self.opened = 0

    def take(self, address: Address) -> Any:
        """An open connection to `address`: an idle one, or a new one."""
        while True:
            with self._mutex:
                idle = self._idle.get(address)
                conn = idle.pop() if idle else None
            if conn is None:
                break
            if idle_and_open(getattr(conn, "_sock", None)):
                return conn
            self.discard(conn)
        return self.open(address)

    def open(self, address: Address, **overrides: Any) -> Any:
        """A new connection to `address` (`overrides`: connection kwargs)."""
        kwargs = dict(self._kwargs)
        if isinstance(address[0], str) and address[1] == 0:
            kwargs["path"] = address[0]
        else:
            kwargs.update(host=address[0], port=address[1])
        kwargs.update(overrides)
        conn = self._cls(**kwargs)
        conn.connect()
        with self._mutex:
            self.opened += 1
        return conn

    def packed(self, conn: Any, args: List[Any]) -> Any:
        key = tuple(args)
        try:
            return self._packed[key]
        except (KeyError, TypeError):
            pass
        packed = conn.pack_command(*args)
        try:
            if len(self._packed) >= 4096:
                self._packed.clear()
            self._packed[key] = packed
        except TypeError:
            pass
        return packed

    def give_back(self, conn: Any, address: Address) -> None:
        """A connection that holds nothing on the server: kept for reuse."""
        with self._mutex:
            idle = self._idle.setdefault(address, [])
            if len(idle) < self.max_idle:
                idle.append(conn)
                return
        self.discard(conn)

    @staticmethod
    def discard(conn: Any) -> None:
        try:
            conn.disconnect()
        except Exception:
            pass

    def close(self) -> None:
        """Closes every idle connection."""
        with self._mutex:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                self.discard(conn)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


_POOLS: "weakref.WeakKeyDictionary[Any, ConnectionPool]" = weakref.WeakKeyDictionary()
_POOLS_MUTEX = threading.Lock()


def _node_pool(client: Any, name: Any):
    """redis.Redis's connection pool, or for a RedisCluster the pool of the
    node serving `name`."""
    get_node = getattr(client, "get_node_from_key", None)
    if get_node is not None:
        return get_node(name).redis_connection.connection_pool
    return client.connection_pool


def pool_for(client: Any, name: Any) -> Tuple[ConnectionPool, Address]:
    """The library's pool for `client` (one per user client, made on first
    use, gone with the client) and the address of the node serving `name`."""
    node = _node_pool(client, name)
    address = address_of(node.connection_kwargs)
    with _POOLS_MUTEX:
        pool = _POOLS.get(client)
        if pool is None:
            pool = ConnectionPool(node.connection_class, node.connection_kwargs)
            _POOLS[client] = pool
    return pool, address


class Dedicated:
    """One connection of the caller's own, taken from the pool for the node
    that serves its key, following MOVED/ASK (a re-issued BLOCK joins the new
    node's queue at the tail: the old queue position does not exist there).

    give_back() returns it to the pool (only when it holds nothing on the
    server); close() closes it (a wait abandoned on the client side: the
    server drops the waiter and any grant tied to the connection)."""

    def __init__(self, pool: ConnectionPool, address: Address) -> None:
        self.pool = pool
        self.address = address
        self.default_timeout = pool.default_timeout
        self._conn: Any = None
        self._asking = False
        #: True once a command reached the server (it may have acted on it
        #: even if its reply never arrives).
        self.sent = False

    @property
    def sock(self) -> Optional[socket.socket]:
        return getattr(self._conn, "_sock", None) if self._conn is not None else None

    def call(self, args: List[Any], timeout: Optional[float], keep_on_interrupt: bool = False) -> Any:
        """Sends `args` and reads the reply (MOVED/ASK followed).
        keep_on_interrupt: an exception while waiting for the reply (a
        KeyboardInterrupt) leaves the connection open, its reply unread, for
        the caller to settle (read()) or close()."""
        redirects = 0
        while True:
            conn = self._connected(timeout)
            try:
                if self._asking:
                    conn.send_command("ASKING")
                    conn.read_response()
                    self._asking = False
                conn.send_packed_command(self.pool.packed(conn, args), check_health=False)
                self.sent = True
                return conn.read_response(disconnect_on_error=not keep_on_interrupt)
            except (MovedError, AskError) as redirect:
                redirects += 1
                if redirects > MAX_REDIRECTS:
                    raise
                # The redirected command did nothing on the old node: its
                # connection is clean.
                self.give_back()
                self.address = (redirect.host, int(redirect.port))
                self._asking = isinstance(redirect, AskError)
                self.sent = False

    def read(self, timeout: Optional[float]) -> Any:
        """Reads a reply still due (see call's keep_on_interrupt)."""
        conn = self._connected(timeout)
        return conn.read_response(disconnect_on_error=False)

    def client_id(self) -> int:
        """The server's CLIENT ID of this connection (asked once per connection)."""
        conn = self._connected(5.0)
        cid = getattr(conn, "_hashlock_id", None)
        if cid is None:
            conn.send_command("CLIENT", "ID", check_health=False)
            cid = conn._hashlock_id = int(conn.read_response())
        return cid

    def _connected(self, timeout: Optional[float]):
        if self._conn is None:
            self._conn = self.pool.take(self.address)
        sock = getattr(self._conn, "_sock", None)
        if sock is not None:
            sock.settimeout(timeout)
        return self._conn

    def give_back(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self.pool.give_back(conn, self.address)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self.pool.discard(conn)
