"""hashlock.Lock (sync) against real Redis 7.0 and Valkey 9.1 servers.

Tests marked module_feature use the module's KEEPALIVE, TOKEN or REPLICAS
(`-m module_feature` selects them). Every mode-parametrized test runs with keepalive=False (watchdog)
and keepalive=True (the default, a module feature)."""

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
import redis

import hashlock
from conftest import WAIT_S, wait_for, waiters
from redisson import try_lock, unlock

MODES = [
    pytest.param(False, id="watchdog"),
    pytest.param(True, id="keepalive", marks=pytest.mark.module_feature),
]


def in_thread(fn):
    """Runs fn in a thread; returns (thread, result dict with 'value' or 'error')."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: B036 - reported to the test
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


@pytest.mark.parametrize("keepalive", MODES)
def test_acquire_reenter_release(r, key, keepalive):
    lock = hashlock.Lock(r, key, lease_ms=20_000, keepalive=keepalive)
    assert len(lock.owner) == 36  # a UUID of its own
    assert hashlock.Lock(r, key).owner != lock.owner
    assert lock.acquire(blocking=False) is True
    assert lock.acquire(blocking=False) is True
    assert lock.holds == 2
    info = lock.info()
    assert (info.owner, info.holds, info.waiters) == (lock.owner, 2, 0)
    assert 0 < info.ttl_ms <= 20_000
    assert r.hgetall(key) == {lock.owner.encode(): b"2"}  # Redisson's layout
    other = hashlock.Lock(r, key, keepalive=keepalive)
    assert other.acquire(blocking=False) is False
    assert other.acquire(timeout=0.05) is False
    assert lock.locked() and lock.owned() and not other.owned()
    assert lock.release() == 1
    assert lock.release() == 0
    assert lock.info() is None and not lock.locked()
    with lock:
        assert lock.owned()
    assert not lock.locked()


@pytest.mark.parametrize("keepalive", MODES)
def test_block_hands_off_between_two_locks(r, key, keepalive):
    a = hashlock.Lock(r, key, keepalive=keepalive)
    b = hashlock.Lock(r, key, keepalive=keepalive)
    assert a.acquire()
    t, out = in_thread(lambda: b.acquire(timeout=WAIT_S))
    assert wait_for(lambda: waiters(r, key) == 1)
    assert a.release() == 0
    t.join(WAIT_S)
    assert out == {"value": True}
    assert b.info().owner == b.owner
    assert b.release() == 0


def test_server_side_timeout_returns_false_and_leaves_the_queue(r, key):
    a = hashlock.Lock(r, key, keepalive=False)
    b = hashlock.Lock(r, key, keepalive=False)
    assert a.acquire()
    started = time.monotonic()
    assert b.acquire(timeout=0.3) is False
    assert time.monotonic() - started >= 0.29
    assert waiters(r, key) == 0
    a.release()


def test_wait_outlasts_the_clients_socket_timeout(server, key):
    """redis-py would cut a 2 s wait on a pooled 0.5 s socket (and retry it
    at the queue's tail); the lock's own connection waits as long as BLOCK."""
    short = server.client(socket_timeout=0.5)
    a = hashlock.Lock(short, key, keepalive=False)
    b = hashlock.Lock(short, key, keepalive=False)
    assert a.acquire(blocking=False)
    t, out = in_thread(lambda: b.acquire(timeout=WAIT_S))
    assert wait_for(lambda: waiters(short, key) == 1)
    time.sleep(1.5)
    a.release()
    t.join(WAIT_S)
    assert out == {"value": True}
    b.release()


class Abandoned(Exception):
    pass


@pytest.mark.parametrize("keepalive", MODES)
def test_interrupted_wait_is_never_granted(r, key, keepalive):
    """A wait abandoned on the client (here a signal handler raising, as
    Ctrl-C does) closes its connection: the server drops the waiter, and
    releasing the lock later grants it to no one."""
    a = hashlock.Lock(r, key, keepalive=keepalive)
    b = hashlock.Lock(r, key, keepalive=keepalive)
    assert a.acquire()

    def on_alarm(*_):
        raise Abandoned()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    main = threading.get_ident()

    def interrupt_once_queued():
        if wait_for(lambda: waiters(server_client, key) == 1):
            signal.pthread_kill(main, signal.SIGALRM)

    server_client = redis.Redis(connection_pool=r.connection_pool)
    t = threading.Thread(target=interrupt_once_queued, daemon=True)
    t.start()
    try:
        with pytest.raises(Abandoned):
            b.acquire(timeout=30)
    finally:
        signal.signal(signal.SIGALRM, previous)
    t.join()
    assert wait_for(lambda: waiters(r, key) == 0)
    assert a.release() == 0
    time.sleep(0.2)
    assert r.execute_command("LOCK.INFO", key) is None


def test_errors_are_typed(r, key):
    lock = hashlock.Lock(r, key, keepalive=False)
    with pytest.raises(hashlock.LockLost) as lost:
        lock.release()
    assert isinstance(lost.value, hashlock.NotOwner)
    assert isinstance(lost.value, redis.ResponseError)
    assert str(lost.value).startswith("NOTOWNER")
    with pytest.raises(hashlock.LockLost):
        lock.renew()

    r.set(key, "not a hash")
    with pytest.raises(hashlock.WrongType):
        lock.acquire(blocking=False)
    with pytest.raises(hashlock.WrongType):
        lock.info()
    r.delete(key)

    r.hset(key, mapping={"a": "1", "b": "1"})
    with pytest.raises(hashlock.NotLock):
        lock.acquire(blocking=False)
    with pytest.raises(hashlock.NotLock):
        lock.acquire(timeout=1)
    with pytest.raises(hashlock.NotLock):
        lock.release()
    assert r.hgetall(key) == {b"a": b"1", b"b": b"1"}
    r.delete(key)

    with pytest.raises(ValueError):
        hashlock.Lock(r, key, lease_ms=0)
    with pytest.raises(ValueError):
        lock.acquire(blocking=False, timeout=1)


@pytest.mark.parametrize("keepalive", MODES)
def test_release_after_loss_raises_lock_lost(r, key, keepalive):
    lock = hashlock.Lock(r, key, keepalive=keepalive)
    assert lock.acquire()
    assert lock.acquire()
    assert r.execute_command("LOCK.FORCERELEASE", key) == 1
    with pytest.raises(hashlock.LockLost):
        lock.release()
    assert lock.holds == 0
    # Re-entry that finds the lock gone is loud too.
    assert lock.acquire()
    r.execute_command("LOCK.FORCERELEASE", key)
    other = hashlock.Lock(r, key, keepalive=False)
    assert other.acquire(blocking=False)
    with pytest.raises(hashlock.LockLost):
        lock.acquire(blocking=False)
    other.release()


def test_watchdog_renews_and_notices_loss(r, key):
    lock = hashlock.Lock(r, key, lease_ms=300, keepalive=False)
    assert lock.acquire()
    time.sleep(1.2)  # four leases
    info = lock.info()
    assert info is not None and info.owner == lock.owner
    lock.renew()
    assert r.execute_command("LOCK.FORCERELEASE", key) == 1
    assert wait_for(lambda: lock.lost)
    with pytest.raises(hashlock.LockLost):
        lock.release()


def test_without_watchdog_a_renew_extends_the_lease(r, key):
    lock = hashlock.Lock(r, key, lease_ms=5_000, keepalive=False)
    assert lock.acquire(blocking=False)
    r.execute_command("PEXPIRE", key, 100)
    lock.renew()
    assert r.pttl(key) > 1_000
    lock.release()


@pytest.mark.parametrize("protocol", [2, 3])
def test_info_in_resp2_and_resp3(server, key, protocol):
    c = server.client(protocol=protocol)
    lock = hashlock.Lock(c, key, keepalive=False)
    assert lock.acquire(blocking=False)
    info = lock.info()
    assert (info.owner, info.holds, info.waiters) == (lock.owner, 1, 0)
    assert lock.release() == 0
    c.close()


def test_decoded_client(server, key):
    c = server.client(decode_responses=True)
    lock = hashlock.Lock(c, key, keepalive=False)
    with lock:
        assert lock.info().owner == lock.owner
    c.close()


@pytest.mark.parametrize("keepalive", MODES)
def test_redisson_interop(r, key, keepalive):
    redisson_owner = f"{uuid.uuid4()}:1"
    assert try_lock(r, key, redisson_owner) is None
    lock = hashlock.Lock(r, key, keepalive=keepalive)
    assert lock.acquire(blocking=False) is False
    t, out = in_thread(lambda: lock.acquire(timeout=WAIT_S))
    assert wait_for(lambda: waiters(r, key) == 1)
    assert unlock(r, key, redisson_owner) == 1  # Redisson's unlock script serves our waiter
    t.join(WAIT_S)
    assert out == {"value": True}
    assert r.hgetall(key) == {lock.owner.encode(): b"1"}
    assert try_lock(r, key, redisson_owner) > 0  # Redisson sees it held (PTTL)
    assert lock.release() == 0
    assert try_lock(r, key, redisson_owner) is None
    # A lock object given Redisson's owner id re-enters Redisson's lock.
    same = hashlock.Lock(r, key, owner=redisson_owner, keepalive=False)
    assert same.acquire(blocking=False)
    assert same.holds == 2
    assert unlock(r, key, redisson_owner) == 0
    assert same.release() == 0


# -- module features (KEEPALIVE, TOKEN, REPLICAS) ------------------------------

HOLDER = """
import sys, time, redis, hashlock
lock = hashlock.Lock(redis.Redis(port=int(sys.argv[1])), sys.argv[2], lease_ms=30000)
assert lock.acquire(blocking=False)
print("held", flush=True)
time.sleep(120)
"""


@pytest.mark.module_feature
def test_keepalive_killed_holder_hands_on_at_once(server, r, key):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(server.port), key], stdout=subprocess.PIPE, env=env
    )
    try:
        assert holder.stdout.readline() == b"held\n"
        info = hashlock.Lock(r, key).info()
        assert info.keepalive is True and info.ttl_ms > 20_000
        waiter = hashlock.Lock(r, key)
        t, out = in_thread(lambda: waiter.acquire(timeout=25))
        assert wait_for(lambda: waiters(r, key) == 1)
        killed = time.monotonic()
        holder.kill()  # SIGKILL: no release, no goodbye
        t.join(25)
        handed_on_s = time.monotonic() - killed
    finally:
        holder.kill()
        holder.wait()
    assert out == {"value": True}
    assert handed_on_s < 5, f"took {handed_on_s:.1f} s; the lease was 30 s"
    assert waiter.info().owner == waiter.owner
    waiter.release()


@pytest.mark.module_feature
def test_keepalive_reports_tie_and_survives_its_lease(r, key):
    lock = hashlock.Lock(r, key, lease_ms=300)
    assert lock.acquire()
    assert lock.info().keepalive is True
    time.sleep(1.0)  # three leases, no watchdog thread: the server renews
    assert lock.info().owner == lock.owner
    lock.renew()
    assert lock.release() == 0


@pytest.mark.module_feature
@pytest.mark.parametrize("keepalive", [False, True], ids=["watchdog", "keepalive"])
def test_token(r, key, keepalive):
    a = hashlock.Lock(r, key, token=True, keepalive=keepalive)
    assert a.token is None
    assert a.acquire()
    first = a.token
    assert isinstance(first, int) and first > 0
    assert a.acquire(blocking=False)
    assert a.token > first  # every acquisition, re-entry included
    assert a.info().token == a.token
    counter = key.join(["redisson_lock_token:{", "}"])
    assert int(r.get(counter)) == a.token
    b = hashlock.Lock(r, key, token=True, keepalive=keepalive)
    t, out = in_thread(lambda: b.acquire(timeout=WAIT_S))
    assert wait_for(lambda: waiters(r, key) == 1)
    a.release()
    a.release()
    t.join(WAIT_S)
    assert out == {"value": True}
    assert b.token > a.token
    b.release()


@pytest.mark.module_feature
def test_replicas_without_replicas_raises_no_replicas(r, key):
    lock = hashlock.Lock(r, key, keepalive=False, replicas=(1, 200))
    with pytest.raises(hashlock.NoReplicas):
        lock.acquire(blocking=False)
    assert lock.info() is None
    assert hashlock.Lock(r, key, keepalive=False, replicas=0).acquire(blocking=False)


def test_with_raises_if_the_wait_ends_without_the_lock(r, key):
    """CLIENT UNBLOCK ends a BLOCK 0 wait with nil: `with` must not run."""
    a = hashlock.Lock(r, key, keepalive=False)
    assert a.acquire()
    ran = []

    def enter():
        with hashlock.Lock(r, key, keepalive=False):
            ran.append(True)

    t, out = in_thread(enter)
    assert wait_for(lambda: waiters(r, key) == 1)
    blocked = [line for line in r.client_list() if "b" in line.get("flags", "")]
    assert len(blocked) == 1
    assert r.client_unblock(blocked[0]["id"])
    t.join(WAIT_S)
    assert isinstance(out.get("error"), hashlock.NotAcquired)
    assert ran == []
    a.release()
