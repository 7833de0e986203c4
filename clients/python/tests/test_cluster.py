"""hashlock.Lock on redis.RedisCluster: routed by key, waits on the key's
node, and a wait whose slot moves away (MOVED) is re-issued on the new node."""

import time

import pytest
import redis
from redis.cluster import RedisCluster

import hashlock
from conftest import WAIT_S, wait_for, waiters
from servers import KINDS, Server
from test_sync import in_thread

CLUSTER = dict(cluster_enabled="yes", cluster_config_file="nodes.conf", cluster_require_full_coverage="no")


def cluster_ok(c) -> bool:
    return b"cluster_state:ok" in c.execute_command("CLUSTER", "INFO")


@pytest.fixture(scope="module", params=KINDS)
def cluster_node(request):
    s = Server(request.param, **CLUSTER)
    c = s.client(protocol=2)
    c.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
    assert wait_for(lambda: cluster_ok(c), timeout=15)
    c.close()
    yield s
    s.stop()


def test_lock_through_redis_cluster(cluster_node, key):
    rc = RedisCluster(host="127.0.0.1", port=cluster_node.port)
    direct = cluster_node.client()
    try:
        a = hashlock.Lock(rc, key, keepalive=False)
        b = hashlock.Lock(rc, key, keepalive=False)
        assert a.acquire()
        assert a.acquire(blocking=False)
        assert a.info().holds == 2
        t, out = in_thread(lambda: b.acquire(timeout=WAIT_S))
        assert wait_for(lambda: waiters(direct, key) == 1)
        assert a.release() == 1
        assert a.release() == 0
        t.join(WAIT_S)
        assert out == {"value": True}
        assert b.release() == 0
        assert not b.locked()
    finally:
        rc.close()
        direct.close()


def node_id(c) -> str:
    return c.execute_command("CLUSTER", "MYID").decode()


class TwoNodes:
    """Two primaries: `src` starts with every slot; a test moves its own
    key's slot to `dst`."""

    def __init__(self, kind):
        self.src, self.dst = Server(kind, **CLUSTER), Server(kind, **CLUSTER)
        self.s, self.d = self.src.client(protocol=2), self.dst.client(protocol=2)
        self.s.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        self.s.execute_command("CLUSTER", "MEET", "127.0.0.1", self.dst.port)
        assert wait_for(
            lambda: cluster_ok(self.s)
            and cluster_ok(self.d)
            and len(self.d.execute_command("CLUSTER", "NODES").splitlines()) == 2,
            timeout=20,
        )
        self.src_id, self.dst_id = node_id(self.s), node_id(self.d)

    def slot(self, key):
        return self.s.execute_command("CLUSTER", "KEYSLOT", key)

    def start_migration(self, key):
        slot = self.slot(key)
        self.d.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", self.src_id)
        self.s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", self.dst_id)

    def finish_migration(self, key):
        slot = self.slot(key)
        self.d.execute_command("CLUSTER", "SETSLOT", slot, "NODE", self.dst_id)
        self.s.execute_command("CLUSTER", "SETSLOT", slot, "NODE", self.dst_id)

    def stop(self):
        self.s.close()
        self.d.close()
        self.src.stop()
        self.dst.stop()


@pytest.fixture(scope="module", params=KINDS)
def two_nodes(request):
    nodes = TwoNodes(request.param)
    yield nodes
    nodes.stop()


def test_blocking_acquire_follows_moved_and_ask(two_nodes, key):
    """The client still maps the key to `src`; the lock's own connection
    follows the server's ASK (slot migrating) and MOVED (slot moved)."""
    rc = RedisCluster(host="127.0.0.1", port=two_nodes.src.port)
    try:
        asked = hashlock.Lock(rc, key + ":ask", keepalive=False)
        two_nodes.start_migration(asked.name)
        assert asked.acquire(timeout=WAIT_S)  # src: ASK (no such key here) -> dst with ASKING
        slot = two_nodes.slot(asked.name)
        assert two_nodes.d.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 1
        assert two_nodes.s.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
        two_nodes.finish_migration(asked.name)
        assert asked.release() == 0

        moved = hashlock.Lock(rc, key, keepalive=False)
        if two_nodes.slot(moved.name) != two_nodes.slot(asked.name):
            two_nodes.start_migration(moved.name)
            two_nodes.finish_migration(moved.name)
        assert moved.acquire(timeout=WAIT_S)  # src: MOVED -> dst
        assert hashlock.Lock(two_nodes.d, key).info().owner == moved.owner
        assert moved.release() == 0
    finally:
        rc.close()


@pytest.mark.module_feature
def test_wait_follows_its_slot_to_the_new_node(two_nodes, key):
    """The module (README, "Running on a cluster"): a waiter gets MOVED when its key's slot moves; the
    library re-issues the wait on the new node, where the lock arrived with
    its holder, and is granted it there on release."""
    s, d = two_nodes.s, two_nodes.d
    rc = RedisCluster(host="127.0.0.1", port=two_nodes.src.port)
    try:
        holder = hashlock.Lock(rc, key, keepalive=False)
        waiter = hashlock.Lock(rc, key, keepalive=False)
        assert holder.acquire()
        t, out = in_thread(lambda: waiter.acquire(timeout=WAIT_S * 2))
        assert wait_for(lambda: waiters(s, key) == 1)
        two_nodes.start_migration(key)
        s.execute_command("MIGRATE", "127.0.0.1", two_nodes.dst.port, "", 0, 5000, "KEYS", key)
        two_nodes.finish_migration(key)
        assert wait_for(lambda: waiters(d, key) == 1, timeout=5), "the wait was not re-issued on the new node"
        assert holder.release() == 0
        t.join(WAIT_S)
        assert out == {"value": True}
        assert hashlock.Lock(d, key).info().owner == waiter.owner
        waiter.release()
    finally:
        rc.close()


def test_asyncio_lock_through_redis_cluster(cluster_node, key):
    import asyncio

    import redis.asyncio.cluster

    from hashlock.asyncio import Lock as AsyncLock

    async def body():
        rc = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster_node.port)
        try:
            a, b = AsyncLock(rc, key, keepalive=False), AsyncLock(rc, key, keepalive=False)
            assert await a.acquire()
            waiting = asyncio.ensure_future(b.acquire(timeout=WAIT_S))
            deadline = time.monotonic() + WAIT_S
            while (await a.info()).waiters != 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert (await a.info()).waiters == 1
            assert await a.release() == 0
            assert await asyncio.wait_for(waiting, WAIT_S) is True
            assert (await b.info()).owner == b.owner
            assert await b.release() == 0
        finally:
            await rc.aclose()

    asyncio.run(body())


@pytest.mark.module_feature
def test_keepalive_lock_follows_its_slot(two_nodes, key):
    """A KEEPALIVE lock whose slot moves arrives on the new node as a plain
    lease (the tie is connection state). The library's check, every third of
    the lease, follows the MOVED and ties it again there, so it does not
    lapse a lease later while the object still claims it."""
    rc = RedisCluster(host="127.0.0.1", port=two_nodes.src.port)
    try:
        holder = hashlock.Lock(rc, key, lease_ms=900)
        assert holder.acquire()
        two_nodes.start_migration(key)
        two_nodes.s.execute_command("MIGRATE", "127.0.0.1", two_nodes.dst.port, "", 0, 5000, "KEYS", key)
        two_nodes.finish_migration(key)
        time.sleep(2.0)  # over two leases
        info = hashlock.Lock(two_nodes.d, key).info()
        assert info is not None and info.owner == holder.owner, "the lock lapsed on the new node"
        assert info.keepalive, "not tied again on the new node"
        assert not holder.lost and holder.holds == 1
        assert holder.release() == 0
        assert hashlock.Lock(two_nodes.d, key).info() is None
    finally:
        rc.close()
