"""The lock's own connection (sync): for blocking waits and KEEPALIVE ties.

A blocking LOCK.ACQUIRE must not share a pooled connection: the pool's
socket timeout (redis-py: 5 s by default) would cut the wait short, and its
retries would silently re-send the BLOCK, losing the queue position. A
KEEPALIVE lock lives exactly as long as the connection that took it, so that
connection must be the lock's alone. So each wait gets a connection of its
own, with no retries and a socket timeout longer than BLOCK, closed whenever
the wait ends without a grant (timeout, error, KeyboardInterrupt): a closed
connection leaves the server's queue, while an abandoned open one could
still be granted the lock.
"""

from typing import Any, Dict, List, Optional, Tuple, Type

from redis.backoff import NoBackoff
from redis.exceptions import AskError, MovedError
from redis.retry import Retry

#: MOVED/ASK redirections followed for one call (a slot moves at most a few
#: times while a client waits).
MAX_REDIRECTS = 5


def connection_factory(client: Any, name: Any) -> Tuple[Type, Dict[str, Any]]:
    """The connection class and settings of the node serving `name`:
    redis.Redis's pool, or for a RedisCluster the pool of the key's node."""
    get_node = getattr(client, "get_node_from_key", None)
    if get_node is not None:
        pool = get_node(name).redis_connection.connection_pool
    else:
        pool = client.connection_pool
    return pool.connection_class, dict(pool.connection_kwargs)


def no_retry_settings(kwargs: Dict[str, Any], socket_timeout: Optional[float]) -> Dict[str, Any]:
    kwargs = dict(kwargs)
    kwargs.update(
        socket_timeout=socket_timeout,
        retry=Retry(NoBackoff(), 0),
        retry_on_timeout=False,
        retry_on_error=[],
    )
    return kwargs


class Dedicated:
    """One connection of the lock's own to the node that serves its key,
    following MOVED/ASK (a re-issued BLOCK joins the new node's queue at
    the tail: the old queue position does not exist there)."""

    def __init__(self, client: Any, name: Any) -> None:
        self._cls, self._kwargs = connection_factory(client, name)
        self.default_timeout: Optional[float] = self._kwargs.get("socket_timeout")
        self._conn = None
        self._asking = False
        #: True once a command reached the server (it may have acted on it
        #: even if its reply never arrives).
        self.sent = False

    def call(self, args: List[Any], timeout: Optional[float]) -> Any:
        redirects = 0
        while True:
            conn = self._connected(timeout)
            try:
                if self._asking:
                    conn.send_command("ASKING")
                    conn.read_response()
                conn.send_command(*args)
                self.sent = True
                return conn.read_response()
            except (MovedError, AskError) as redirect:
                redirects += 1
                if redirects > MAX_REDIRECTS:
                    raise
                self.close()
                self._kwargs.update(host=redirect.host, port=redirect.port)
                self._asking = isinstance(redirect, AskError)
                # The redirected command did nothing on the old node.
                self.sent = False

    def _connected(self, timeout: Optional[float]):
        if self._conn is None:
            self._conn = self._cls(**no_retry_settings(self._kwargs, timeout))
            self._conn.connect()
        else:
            sock = getattr(self._conn, "_sock", None)
            if sock is not None:
                sock.settimeout(timeout)
        return self._conn

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.disconnect()
            except Exception:
                pass
