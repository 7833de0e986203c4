"""Connections are reused: a connection whose lock was released cleanly (or
whose wait the server answered) goes back to the library's pool; only a
wait abandoned on the client side closes its connection. And a wait
cancelled in the same instant as the holder's release never keeps the lock
(its wait is tied to its connection, so the server releases a grant on its
way when the connection closes)."""

import asyncio
import signal
import threading
import time

import pytest
import redis.asyncio

import hashlock
from conftest import wait_for, waiters
from hashlock.asyncio import Lock as AsyncLock
from test_sync import MODES, in_thread

PAIRS = 200


def connections_received(r) -> int:
    return int(r.info("stats")["total_connections_received"])


@pytest.mark.parametrize("keepalive", MODES)
def test_acquisitions_reuse_connections(server, key, keepalive):
    client = server.client()
    admin = server.client()
    locks = [hashlock.Lock(client, f"{key}:{i}", keepalive=keepalive) for i in range(4)]
    for lock in locks:  # warm the pool
        assert lock.acquire(timeout=5)
        assert lock.release() == 0
    before = connections_received(admin)
    for i in range(PAIRS):
        lock = locks[i % len(locks)]
        assert lock.acquire(timeout=5)  # a wait: on a connection of the library's
        assert lock.release() == 0
    assert connections_received(admin) - before == 0, "an acquisition opened a connection"
    # A wait the server answers (nil at BLOCK's end) leaves a clean connection too.
    holder = hashlock.Lock(client, key, keepalive=keepalive)
    assert holder.acquire()
    before = connections_received(admin)
    for _ in range(5):
        assert not hashlock.Lock(client, key, keepalive=keepalive).acquire(timeout=0.02)
    assert connections_received(admin) - before <= 1
    holder.release()


class Abandoned(Exception):
    pass


def blocked_ids(admin):
    return [c["id"] for c in admin.client_list() if "b" in c.get("flags", "")]


def open_ids(admin):
    return {c["id"] for c in admin.client_list()}


@pytest.mark.parametrize("keepalive", MODES)
def test_only_an_abandoned_wait_closes_its_connection(server, key, keepalive):
    client = server.client()
    admin = server.client()
    holder = hashlock.Lock(client, key, keepalive=keepalive)
    assert holder.acquire()
    # A wait that ends with the lock: its connection stays open (pooled).
    waiter = hashlock.Lock(client, key, keepalive=keepalive)
    t, out = in_thread(lambda: waiter.acquire(timeout=30))
    assert wait_for(lambda: len(blocked_ids(admin)) == 1)
    served = blocked_ids(admin)[0]
    assert holder.release() == 0
    t.join(10)
    assert out == {"value": True}
    assert waiter.release() == 0
    assert served in open_ids(admin), "a clean wait's connection was closed"
    # A wait abandoned on the client side (a signal handler raising, as
    # Ctrl-C does): its connection is closed, and with it its queue entry.
    assert holder.acquire()

    def on_alarm(*_):
        raise Abandoned()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    main = threading.get_ident()
    seen = []

    def interrupt_once_queued():
        if wait_for(lambda: len(blocked_ids(admin)) == 1):
            seen.extend(blocked_ids(admin))
            signal.pthread_kill(main, signal.SIGALRM)

    t = threading.Thread(target=interrupt_once_queued, daemon=True)
    t.start()
    try:
        with pytest.raises(Abandoned):
            waiter.acquire(timeout=30)
    finally:
        signal.signal(signal.SIGALRM, previous)
    t.join()
    assert wait_for(lambda: seen and seen[0] not in open_ids(admin)), "the abandoned wait's connection stayed open"
    assert waiters(admin, key) == 0
    assert holder.release() == 0


TRIALS = 100


@pytest.mark.parametrize("keepalive", MODES)
def test_asyncio_cancel_racing_a_release_never_keeps_the_lock(server, key, keepalive):
    """A waiter cancelled in the same tick as the holder's release: whatever
    the order the server sees them in, the lock ends up free, never held by
    the cancelled waiter for its lease."""

    async def body():
        c = redis.asyncio.Redis(port=server.port)
        kept = 0
        for trial in range(TRIALS):
            k = f"{key}:{trial}"
            holder = AsyncLock(c, k, keepalive=keepalive)
            waiter = AsyncLock(c, k, keepalive=keepalive)
            assert await holder.acquire()
            waiting = asyncio.ensure_future(waiter.acquire(timeout=30))
            while (await _waiters(c, k)) != 1:
                await asyncio.sleep(0.001)
            releasing = asyncio.ensure_future(holder.release())
            for _ in range(trial % 3):  # vary who goes first
                await asyncio.sleep(0)
            waiting.cancel()
            assert await releasing == 0
            try:
                got = await waiting
            except asyncio.CancelledError:
                got = False
            if got:  # the grant won the race: a held lock, released normally
                assert await waiter.release() == 0
                continue
            deadline = time.monotonic() + 2
            while await c.execute_command("LOCK.INFO", k) is not None and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
            if await c.execute_command("LOCK.INFO", k) is not None:
                kept += 1
                await c.execute_command("LOCK.FORCERELEASE", k)
        await c.aclose()
        assert kept == 0, f"the cancelled waiter kept the lock in {kept} of {TRIALS} trials"

    asyncio.run(body())


async def _waiters(c, k) -> int:
    from hashlock._protocol import parse_info

    info = parse_info(await c.execute_command("LOCK.INFO", k))
    return 0 if info is None else info.waiters
