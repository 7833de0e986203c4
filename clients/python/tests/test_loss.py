"""A lost lock is reported when it happens, in every mode: `lost` (and
`on_lost`) for the sync and asyncio locks. The connection's end is seen at
once (KEEPALIVE: the server ties the lock to it); a FORCERELEASE or a lapsed
lease at the next check, every third of the lease."""

import asyncio
import time

import pytest
import redis
import redis.asyncio

import hashlock
from conftest import wait_for
from hashlock.asyncio import Lock as AsyncLock
from servers import KINDS, Server
from test_sync import MODES

#: A lease long enough that only the connection can explain a loss seen
#: within this test's limits (the checks run every 10 s).
LONG_MS = 30_000
#: Seen "at once": well under a check interval of the long lease.
AT_ONCE_S = 2.0


def kill_connection(r, lock) -> None:
    """CLIENT KILL of the connection the lock is tied to (by its address)."""
    host, port = lock._tied.sock.getsockname()[:2]
    assert r.client_kill(f"{host}:{port}")


@pytest.mark.module_feature
def test_keepalive_connection_killed_is_lost_at_once(r, key):
    seen = []
    lock = hashlock.Lock(r, key, lease_ms=LONG_MS, on_lost=seen.append)
    assert lock.acquire()
    assert not lock.lost
    started = time.monotonic()
    kill_connection(r, lock)
    assert wait_for(lambda: lock.lost, timeout=AT_ONCE_S), "CLIENT KILL not reported"
    assert time.monotonic() - started < AT_ONCE_S
    assert wait_for(lambda: seen, timeout=1), "on_lost not called"
    assert isinstance(seen[0], hashlock.LockLost) and "connection" in str(seen[0])
    assert lock.holds == 0
    assert r.execute_command("LOCK.INFO", key) is None  # the server released it
    with pytest.raises(hashlock.LockLost):
        lock.release()
    assert lock.acquire(blocking=False), "usable again"
    assert not lock.lost
    assert lock.release() == 0


@pytest.mark.module_feature
@pytest.mark.parametrize("kind", KINDS)
def test_keepalive_server_gone_is_lost_at_once(kind, key):
    s = Server(kind)
    try:
        lock = hashlock.Lock(s.client(), key, lease_ms=LONG_MS)
        assert lock.acquire()
        s.proc.kill()
        s.proc.wait()
        assert wait_for(lambda: lock.lost, timeout=AT_ONCE_S), "the server's death not reported"
    finally:
        s.stop()


@pytest.mark.parametrize("keepalive", MODES)
def test_force_release_is_lost_at_the_next_check(r, key, keepalive):
    lock = hashlock.Lock(r, key, lease_ms=600, keepalive=keepalive)
    assert lock.acquire()
    time.sleep(0.5)
    assert not lock.lost, "a healthy lock is not reported lost"
    assert r.execute_command("LOCK.FORCERELEASE", key) == 1
    assert wait_for(lambda: lock.lost, timeout=2.0), "FORCERELEASE not reported"
    assert "LOCK.RENEW" in str(lock.lost_reason)


@pytest.mark.parametrize("keepalive", MODES)
def test_lapsed_lease_is_lost(r, key, keepalive):
    """The lease ends under the holder (here cut short with PEXPIRE)."""
    lock = hashlock.Lock(r, key, lease_ms=900, keepalive=keepalive)
    assert lock.acquire()
    assert r.pexpire(key, 1)
    assert wait_for(lambda: lock.lost, timeout=2.0), "a lapsed lease not reported"


@pytest.mark.module_feature
def test_keepalive_check_reties_an_untied_lock(r, key):
    """The tie can go without the lock (failover, slot migration: the tie is
    connection state); the check every third of the lease ties it again
    instead of letting the lease lapse."""
    lock = hashlock.Lock(r, key, lease_ms=600)
    assert lock.acquire()
    # Untie it from another connection, as a failover would.
    assert r.execute_command("LOCK.RENEW", key, lock.owner, "PX", 600) == 1
    assert not hashlock.Lock(r, key).info().keepalive
    assert wait_for(lambda: hashlock.Lock(r, key).info().keepalive, timeout=2.0), "not re-tied"
    time.sleep(1.0)  # longer than the lease
    assert lock.owned() and not lock.lost
    assert lock.release() == 0


@pytest.mark.module_feature
def test_asyncio_keepalive_connection_killed_is_lost_at_once(server, r, key):
    async def body():
        c = redis.asyncio.Redis(port=server.port)
        seen = []
        lock = AsyncLock(c, key, lease_ms=LONG_MS, on_lost=seen.append)
        assert await lock.acquire()
        host, port = lock._tied._conn._writer.get_extra_info("sockname")[:2]
        assert r.client_kill(f"{host}:{port}")
        deadline = time.monotonic() + AT_ONCE_S
        while not lock.lost and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        while not seen and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert lock.lost and seen, "CLIENT KILL not reported"
        with pytest.raises(hashlock.LockLost):
            await lock.release()
        await c.aclose()

    asyncio.run(body())


@pytest.mark.parametrize("keepalive", MODES)
def test_asyncio_force_release_is_lost(server, r, key, keepalive):
    async def body():
        c = redis.asyncio.Redis(port=server.port)
        lock = AsyncLock(c, key, lease_ms=600, keepalive=keepalive)
        assert await lock.acquire()
        assert r.execute_command("LOCK.FORCERELEASE", key) == 1
        deadline = time.monotonic() + 2.0
        while not lock.lost and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert lock.lost, "FORCERELEASE not reported"
        await c.aclose()

    asyncio.run(body())


@pytest.mark.parametrize("kind", KINDS)
def test_module_not_loaded(kind, key):
    s = Server(kind, module=False)
    try:
        for keepalive in (True, False):
            lock = hashlock.Lock(s.client(), key, keepalive=keepalive)
            with pytest.raises(hashlock.ModuleNotLoaded, match="the hashlock module is not loaded"):
                lock.acquire(blocking=False)
        with pytest.raises(hashlock.ModuleNotLoaded, match="the hashlock module is not loaded"):
            hashlock.Lock(s.client(), key).info()

        async def body():
            c = redis.asyncio.Redis(port=s.port)
            with pytest.raises(hashlock.ModuleNotLoaded, match="the hashlock module is not loaded"):
                await AsyncLock(c, key).acquire()
            await c.aclose()

        asyncio.run(body())
    finally:
        s.stop()
