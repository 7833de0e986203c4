"""hashlock.asyncio.Lock against real servers (asyncio.run per test, so no
pytest plugin is needed)."""

import asyncio
import time

import pytest
import redis.asyncio

import hashlock
from conftest import WAIT_S
from hashlock._protocol import parse_info
from hashlock.asyncio import Lock
from test_sync import MODES


async def waiters(c, key) -> int:
    info = parse_info(await c.execute_command("LOCK.INFO", key))
    return 0 if info is None else info.waiters


async def until(predicate, timeout=WAIT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await predicate():
            return True
        await asyncio.sleep(0.01)
    return bool(await predicate())


def run(server, body):
    async def main():
        c = redis.asyncio.Redis(port=server.port)
        try:
            await body(c)
        finally:
            await c.aclose()

    asyncio.run(main())


@pytest.mark.parametrize("keepalive", MODES)
def test_acquire_reenter_release_and_async_with(server, key, keepalive):
    async def body(c):
        lock = Lock(c, key, keepalive=keepalive)
        assert await lock.acquire(blocking=False)
        assert await lock.acquire()
        info = await lock.info()
        assert (info.owner, info.holds) == (lock.owner, 2)
        assert not await Lock(c, key, keepalive=keepalive).acquire(blocking=False)
        assert await lock.release() == 1
        assert await lock.release() == 0
        async with lock:
            assert await lock.owned()
        assert not await lock.locked()

    run(server, body)


@pytest.mark.parametrize("keepalive", MODES)
def test_block_hands_off(server, key, keepalive):
    async def body(c):
        a, b = Lock(c, key, keepalive=keepalive), Lock(c, key, keepalive=keepalive)
        assert await a.acquire()
        waiting = asyncio.ensure_future(b.acquire(timeout=WAIT_S))
        assert await until(lambda: _eq(waiters(c, key), 1))
        assert await a.release() == 0
        assert await asyncio.wait_for(waiting, WAIT_S) is True
        assert (await b.info()).owner == b.owner
        await b.release()

    run(server, body)


async def _eq(awaitable, value):
    return await awaitable == value


@pytest.mark.parametrize("keepalive", MODES)
def test_cancelled_wait_is_never_granted(server, key, keepalive):
    """A client-side timeout shorter than BLOCK: the cancelled acquire
    closes its connection; the holder's release grants no one."""

    async def body(c):
        a, b = Lock(c, key, keepalive=keepalive), Lock(c, key, keepalive=keepalive)
        assert await a.acquire()
        waiting = asyncio.ensure_future(asyncio.wait_for(b.acquire(timeout=30), 0.5))
        assert await until(lambda: _eq(waiters(c, key), 1))
        with pytest.raises(asyncio.TimeoutError):
            await waiting
        assert await until(lambda: _eq(waiters(c, key), 0))
        assert await a.release() == 0
        await asyncio.sleep(0.2)
        assert await c.execute_command("LOCK.INFO", key) is None
        # The lock object is usable again afterwards.
        assert await b.acquire(blocking=False)
        assert await b.release() == 0

    run(server, body)


def test_wait_outlasts_the_clients_socket_timeout(server, key):
    async def body(_):
        c = redis.asyncio.Redis(port=server.port, socket_timeout=0.5)
        a, b = Lock(c, key, keepalive=False), Lock(c, key, keepalive=False)
        assert await a.acquire()
        waiting = asyncio.ensure_future(b.acquire(timeout=WAIT_S))
        await asyncio.sleep(1.5)
        await a.release()
        assert await asyncio.wait_for(waiting, WAIT_S) is True
        await b.release()
        await c.aclose()

    run(server, body)


def test_errors_and_watchdog(server, key):
    async def body(c):
        lock = Lock(c, key, lease_ms=300, keepalive=False)
        with pytest.raises(hashlock.LockLost):
            await lock.release()
        await c.set(key, "x")
        with pytest.raises(hashlock.WrongType):
            await lock.acquire(blocking=False)
        await c.delete(key)
        await c.hset(key, mapping={"a": "1", "b": "2"})
        with pytest.raises(hashlock.NotLock):
            await lock.info()
        await c.delete(key)
        assert await lock.acquire()
        await asyncio.sleep(1.2)  # four leases: the watchdog task renews
        assert (await lock.info()).owner == lock.owner
        await c.execute_command("LOCK.FORCERELEASE", key)
        assert await until(lambda: _true(lock.lost))
        with pytest.raises(hashlock.LockLost):
            await lock.release()

    run(server, body)


async def _true(v):
    return v


@pytest.mark.module_feature
def test_token(server, key):
    async def body(c):
        lock = Lock(c, key, token=True)
        assert await lock.acquire()
        first = lock.token
        assert first > 0
        assert await lock.acquire()
        assert lock.token > first
        assert (await lock.info()).token == lock.token
        await lock.release()
        await lock.release()

    run(server, body)


@pytest.mark.module_feature
def test_no_replicas(server, key):
    async def body(c):
        with pytest.raises(hashlock.NoReplicas):
            await Lock(c, key, keepalive=False, replicas=(1, 100)).acquire()
        assert await c.execute_command("LOCK.INFO", key) is None

    run(server, body)
