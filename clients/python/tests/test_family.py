"""Semaphore, Latch, ReadWriteLock, MultiLock (sync and asyncio) against real
Redis 7.0 and Valkey 9.1 servers: replies, waits in the server's queue,
KEEPALIVE leases returned on exit, error and interruption, typed errors,
and waits abandoned on the client side never granted (races, many trials)."""

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import redis
import redis.asyncio

import hashlock
import hashlock.asyncio as ha
from conftest import WAIT_S, wait_for
from test_sync import in_thread

#: Race trials per test (each: a wait abandoned in the same instant as the
#: release that would grant it).
TRIALS = 60


def queued(r, key) -> int:
    return len(r.execute_command("LOCK.WAITERS", key))


def arun(server, body, **kwargs):
    async def main():
        c = redis.asyncio.Redis(port=server.port, **kwargs)
        try:
            await body(c)
        finally:
            await c.aclose()

    asyncio.run(main())


class Abandoned(Exception):
    pass


def interrupt_when(predicate):
    """Raises Abandoned in the calling thread (as Ctrl-C would) once
    predicate() holds; returns a function that restores the handler."""
    def handler(signum, frame):
        # Only while the wait reads its reply: an exception landing anywhere
        # else (after the reply was read) is a different story, which no
        # library can make safe in Python.
        f = frame
        while f is not None:
            if f.f_code.co_name in ("read_response", "result"):
                raise Abandoned()
            f = f.f_back

    previous = signal.signal(signal.SIGALRM, handler)
    main = threading.get_ident()
    done = threading.Event()

    def fire():
        if wait_for(lambda: done.is_set() or predicate(), interval=0.001) and not done.is_set():
            signal.pthread_kill(main, signal.SIGALRM)

    t = threading.Thread(target=fire, daemon=True)
    t.start()

    def restore():
        done.set()
        t.join()
        signal.signal(signal.SIGALRM, previous)

    return restore


# -- Semaphore ------------------------------------------------------------------


def test_semaphore_anonymous_permits(r, key):
    sem = hashlock.Semaphore(r, key)
    assert sem.create(3) is True
    assert sem.create(9) is False
    assert sem.acquire(2) is True
    assert sem.acquire(2, blocking=False) is False
    assert sem.available() == 1
    assert sem.release(2) == 3
    assert sem.add(-1) == 2
    assert sem.drain() == 2
    assert sem.acquire(timeout=0.1) is False  # BLOCK ran out on the server
    t, out = in_thread(lambda: sem.acquire(2, timeout=WAIT_S))
    assert wait_for(lambda: queued(r, key) == 1)
    assert r.execute_command("LOCK.WAITERS", key)[0][2] == b"acquire 2"
    assert sem.release() == 1  # one is not enough for the head
    assert sem.release() == 0  # the head took both
    t.join(WAIT_S)
    assert out == {"value": True}
    with pytest.raises(ValueError):
        sem.acquire(0)


def test_semaphore_lease_returns_on_exit_and_error(r, key):
    sem = hashlock.Semaphore(r, key)
    sem.create(2)
    with sem.lease(2) as lease:
        assert len(lease.ids) == 2 and all(len(i) == 32 for i in lease.ids)
        info = sem.info()
        assert (info.available, info.leased, info.keepalive) == (0, 2, 2)
    assert sem.info().available == 2
    with pytest.raises(RuntimeError):
        with sem.lease():
            raise RuntimeError("the work failed")
    assert sem.info().available == 2
    with pytest.raises(hashlock.NotAcquired):
        sem.lease(3, timeout=0.05)
    # keepalive=False: a lease of lease_ms, renewed by the library.
    watchdog = hashlock.Semaphore(r, key, lease_ms=300, keepalive=False)
    lease = watchdog.lease()
    time.sleep(0.8)  # more than two leases
    assert sem.info().leased == 1 and not lease.lost
    assert lease.release() == 1
    assert sem.info().available == 2


def test_semaphore_lease_lost_is_reported_at_once(r, key):
    """A leased permit cut short by someone else lapses on the server
    (semaphore.expired): the lease hears it at once, not at its next check
    (10 s away with this lease)."""
    sem = hashlock.Semaphore(r, key, keepalive=False)
    sem.create(1)
    seen = []
    lease = sem.lease(on_lost=seen.append)
    assert r.execute_command("SEMAPHORE.RENEW", key, lease.ids[0], "PX", 1) == 1
    assert wait_for(lambda: lease.lost, timeout=2.0)
    assert seen and isinstance(seen[0], hashlock.LockLost)
    with pytest.raises(hashlock.LockLost):
        lease.release()
    assert sem.info().available == 1


@pytest.mark.module_feature
def test_semaphore_killed_leaseholder_returns_permits(server, r, key):
    holder = subprocess.Popen(
        [sys.executable, "-c", LEASE_HOLDER, str(server.port), key],
        stdout=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    try:
        assert holder.stdout.readline() == b"leased\n"
        sem = hashlock.Semaphore(r, key)
        t, out = in_thread(lambda: sem.lease(2, timeout=25))
        assert wait_for(lambda: queued(r, key) == 1)
        killed = time.monotonic()
        holder.kill()
        t.join(25)
        took = time.monotonic() - killed
    finally:
        holder.kill()
        holder.wait()
    assert isinstance(out.get("value"), hashlock.Lease), out
    assert took < 5
    out["value"].release()


LEASE_HOLDER = """
import sys, time, redis, hashlock
sem = hashlock.Semaphore(redis.Redis(port=int(sys.argv[1])), sys.argv[2])
sem.create(2)
lease = sem.lease(2)
print("leased", flush=True)
time.sleep(120)
"""


def abandon_race(r, key, start_wait, release):
    """One trial: `start_wait()` queues, and is interrupted (Abandoned, as
    Ctrl-C would) while another thread runs `release()` the moment it is
    queued. Returns what start_wait returned (a grant it then owns), or None
    if the interruption won."""
    restore = interrupt_when(lambda: queued(r, key) == 1)
    over = threading.Event()

    def release_once_queued():
        # Released in every trial: the moment the wait is queued (or over).
        wait_for(lambda: over.is_set() or queued(r, key) == 1, interval=0.0005)
        release()

    releaser = threading.Thread(target=release_once_queued)
    releaser.start()
    got = None
    try:
        try:
            got = start_wait()
        finally:
            over.set()
            restore()  # a late interruption lands here
            releaser.join()
    except Abandoned:
        pass
    return got


def test_semaphore_interrupted_waits_are_never_granted(r, key):
    """A wait abandoned in the same instant as the release that would grant
    it: an anonymous acquire (unblocked on the server, a grant on its way
    given back) and a lease (tied: its connection's close gives it back).
    Permits are conserved every time."""
    sem = hashlock.Semaphore(r, key)
    sem.create(1)
    abandoned = 0
    for trial in range(TRIALS):
        lease = trial % 2 == 1
        assert sem.acquire(blocking=False)
        got = abandon_race(r, key, (lambda: sem.lease(timeout=30)) if lease else (lambda: sem.acquire(timeout=30)), sem.release)
        if got is None:
            abandoned += 1
        elif lease:
            got.release()  # granted before the interruption: its own
        else:
            sem.release()
        assert wait_for(lambda: queued(r, key) == 0 and sem.info().available == 1, timeout=5), (trial, got, sem.info())
        assert sem.info().leased == 0
    assert abandoned > 0


def test_semaphore_asyncio(server, key):
    async def body(c):
        sem = ha.Semaphore(c, key)
        assert await sem.create(2)
        async with sem.leased(2) as lease:
            assert len(lease.ids) == 2
            assert (await sem.info()).available == 0
        assert (await sem.info()).available == 2
        assert await sem.acquire(2)
        assert not await sem.acquire(timeout=0.05)
        assert await sem.release(2) == 2
        with pytest.raises(hashlock.NotAcquired):
            await sem.lease(3, timeout=0.05)
        # A lease cancelled inside its block is returned.
        async def work():
            async with sem.leased() as _:
                await asyncio.sleep(30)

        task = asyncio.ensure_future(work())
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(100):
            if (await sem.info()).available == 2:
                break
            await asyncio.sleep(0.01)
        assert (await sem.info()).available == 2

    arun(server, body)


def test_semaphore_asyncio_cancelled_waits_are_never_granted(server, key):
    async def body(c):
        sem = ha.Semaphore(c, key)
        await sem.create(1)
        cancelled = 0
        for trial in range(TRIALS):
            lease = trial % 2 == 1
            assert await sem.acquire(blocking=False)
            waiting = asyncio.ensure_future(sem.lease(timeout=30) if lease else sem.acquire(timeout=30))
            while len(await c.execute_command("LOCK.WAITERS", key)) != 1:
                await asyncio.sleep(0.001)
            if trial % 4 >= 2:
                # The cancellation first, the release racing it: on a busy
                # machine the grant can win every race of the other order.
                release = asyncio.ensure_future(sem.release())
                waiting.cancel()
                await release
            else:
                await sem.release()  # sent; the cancellation comes in the same tick
                waiting.cancel()
            try:
                got = await waiting
            except asyncio.CancelledError:
                got = None
                cancelled += 1
            if got is not None and got is not False:
                # Granted before the cancellation reached it: a grant it owns.
                if lease:
                    await got.release()
                else:
                    await sem.release()
            for _ in range(300):
                info = await sem.info()
                if info.available == 1 and info.waiters == 0 and info.leased == 0:
                    break
                await asyncio.sleep(0.01)
            assert (info.available, info.waiters, info.leased) == (1, 0, 0), (trial, info)
        assert cancelled > 0

    arun(server, body)


def test_semaphore_errors_are_typed(r, key):
    r.set(key, "x")
    sem = hashlock.Semaphore(r, key)
    with pytest.raises(hashlock.NotSemaphore):
        sem.acquire(blocking=False)
    r.hset(key + "h", "a", "1")
    with pytest.raises(hashlock.WrongType):
        hashlock.Semaphore(r, key + "h").info()


# -- Latch ------------------------------------------------------------------------


def test_latch(r, key):
    latch = hashlock.Latch(r, key)
    assert latch.wait(timeout=0) is True  # no latch: open
    assert latch.create(2) is True
    assert latch.create(5) is False
    assert latch.count() == 2
    assert latch.wait(timeout=0.05) is False
    t, out = in_thread(lambda: latch.wait(timeout=WAIT_S))
    assert wait_for(lambda: queued(r, key) == 1)
    assert latch.count_down() == 1
    assert latch.count_down() == 0
    t.join(WAIT_S)
    assert out == {"value": True}
    r.set(key, "nope")
    with pytest.raises(hashlock.NotLatch):
        latch.count()


def test_latch_asyncio(server, key):
    async def body(c):
        latch = ha.Latch(c, key)
        assert await latch.create(1)
        waiting = asyncio.ensure_future(latch.wait(timeout=WAIT_S))
        while len(await c.execute_command("LOCK.WAITERS", key)) != 1:
            await asyncio.sleep(0.005)
        assert await latch.count_down() == 0
        assert await waiting is True
        # A cancelled wait leaves the queue.
        await latch.create(1)
        waiting = asyncio.ensure_future(asyncio.wait_for(latch.wait(), 0.2))
        with pytest.raises(asyncio.TimeoutError):
            await waiting
        for _ in range(100):
            if not await c.execute_command("LOCK.WAITERS", key):
                break
            await asyncio.sleep(0.01)
        assert await c.execute_command("LOCK.WAITERS", key) == []

    arun(server, body)


# -- ReadWriteLock ---------------------------------------------------------------


def test_rwlock_readers_share_writers_wait(r, key):
    a = hashlock.ReadWriteLock(r, key)
    b = hashlock.ReadWriteLock(r, key)
    w = hashlock.ReadWriteLock(r, key, token=True)
    ra = a.read()
    with b.read():
        info = a.info()
        assert (info.mode, info.readers, info.read_holds, info.keepalive) == ("read", 2, 2, 2)
        t, out = in_thread(lambda: w.write(timeout=WAIT_S))
        assert wait_for(lambda: queued(r, key) == 1)
        # A reader behind a queued writer waits (writers do not starve).
        assert a.acquire("READ", blocking=False) == 2  # a re-entry is never queued
        assert hashlock.ReadWriteLock(r, key).acquire("READ", blocking=False) is None
        a.release("READ")
    ra.release()
    t.join(WAIT_S)
    hold = out["value"]
    assert isinstance(hold, hashlock.WriteHold) and hold.token > 0
    info = w.info()
    assert (info.mode, info.writer, info.write_holds) == ("write", w.owner, 1)
    hold.release()
    assert w.info() is None


def test_rwlock_downgrade_and_no_upgrade(r, key):
    rw = hashlock.ReadWriteLock(r, key)
    with rw.write() as w:
        assert rw.write(blocking=False).release() == 1  # re-entry
        read = w.downgrade()
        assert w.released
        info = rw.info()
        assert (info.mode, info.read_holds, info.write_holds) == ("read", 1, 0)
        with pytest.raises(hashlock.NoUpgrade):
            rw.write()
        assert rw.read_holds == 1  # nothing changed
        read.release()
    assert rw.info() is None
    with pytest.raises(hashlock.LockLost):
        rw.release("READ")


def test_rwlock_loss_is_reported(r, key):
    seen = []
    rw = hashlock.ReadWriteLock(r, key, on_lost=seen.append)
    hold = rw.write()
    assert r.execute_command("RWLOCK.FORCERELEASE", key) == 1
    assert wait_for(lambda: rw.lost, timeout=2.0)
    assert seen
    with pytest.raises(hashlock.LockLost):
        hold.release()


@pytest.mark.parametrize("keepalive", [True, False], ids=["keepalive", "watchdog"])
def test_rwlock_interrupted_waits_are_never_granted(r, key, keepalive):
    """A writer waiting behind a reader is interrupted in the same instant
    as the reader's release: it never keeps the lock."""
    reader = hashlock.ReadWriteLock(r, key, keepalive=keepalive)
    writer = hashlock.ReadWriteLock(r, key, keepalive=keepalive)
    abandoned = 0
    for trial in range(TRIALS):
        hold = reader.read()
        got = abandon_race(r, key, lambda: writer.write(timeout=30), hold.release)
        if got is None:
            abandoned += 1
        else:
            got.release()
        assert wait_for(lambda: writer.info() is None and queued(r, key) == 0, timeout=5), (trial, writer.info())
    assert abandoned > 0


def test_rwlock_asyncio_cancelled_waits_are_never_granted(server, key):
    async def body(c):
        reader = ha.ReadWriteLock(c, key)
        writer = ha.ReadWriteLock(c, key)
        cancelled = 0
        for trial in range(TRIALS):
            hold = await reader.read()
            waiting = asyncio.ensure_future(writer.write(timeout=30))
            while len(await c.execute_command("LOCK.WAITERS", key)) != 1:
                await asyncio.sleep(0.001)
            if trial % 2:
                # The cancellation first, the release racing it: on a busy
                # machine the grant can win every race of the other order.
                release = asyncio.ensure_future(hold.release())
                waiting.cancel()
                await release
            else:
                await hold.release()
                waiting.cancel()
            try:
                got = await waiting
                await got.release()  # granted before the cancellation reached it
            except asyncio.CancelledError:
                cancelled += 1
            for _ in range(300):
                if await c.execute_command("RWLOCK.INFO", key) is None:
                    break
                await asyncio.sleep(0.01)
            assert await c.execute_command("RWLOCK.INFO", key) is None, trial
        assert cancelled > 0
        # And the objects still work.
        async with await writer.write() as w:
            r2 = await w.downgrade()
            await r2.release()

    arun(server, body)


# -- MultiLock ---------------------------------------------------------------------


def test_multilock_all_or_nothing(r, key):
    names = [f"{{{key}}}:a", f"{{{key}}}:b", f"{{{key}}}:c"]
    single = hashlock.Lock(r, names[1])
    assert single.acquire()
    m = hashlock.MultiLock(r, names)
    assert m.acquire(blocking=False) is False
    assert r.execute_command("LOCK.INFO", names[0]) is None  # nothing taken
    t, out = in_thread(lambda: m.acquire(timeout=WAIT_S))
    assert wait_for(lambda: queued(r, names[0]) == 1 and queued(r, names[1]) == 1)
    single.release()
    t.join(WAIT_S)
    assert out == {"value": True}
    assert [hashlock.Lock(r, n).info().owner for n in names] == [m.owner] * 3
    assert m.acquire(blocking=False) and m.holds == 2
    assert m.release() == 1
    assert m.release() == 0
    assert all(r.execute_command("LOCK.INFO", n) is None for n in names)
    with pytest.raises(hashlock.LockLost):
        m.release()
    with m:
        assert hashlock.Lock(r, names[2]).info().keepalive
    with pytest.raises(ValueError):
        hashlock.MultiLock(r, [])


def test_multilock_opposite_orders_never_deadlock(server, key):
    names = [f"{{{key}}}:x", f"{{{key}}}:y"]
    counts = [0, 0]

    def worker(i):
        c = server.client()
        m = hashlock.MultiLock(c, names if i % 2 else names[::-1])
        for _ in range(20):
            with m:
                counts[i % 2] += 1
        c.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S * 3)
    assert counts == [40, 40]


def test_multilock_asyncio(server, key):
    async def body(c):
        names = [f"{{{key}}}:a", f"{{{key}}}:b"]
        m = ha.MultiLock(c, names)
        async with m:
            assert not await ha.MultiLock(c, names[::-1]).acquire(blocking=False)
        assert await c.execute_command("LOCK.INFO", names[0]) is None

    arun(server, body)
