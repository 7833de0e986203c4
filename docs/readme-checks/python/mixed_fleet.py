"""Redisson-style clients next to LOCK.* clients (README: Mixed fleets).
A Redisson-style client runs Redisson's lock script (testkit's text), waits
for the unlock message on Redisson's channel or for the returned PTTL, and
retries, as RedissonLock.lock() does. Usage: mixed_fleet.py PORT"""
import sys, threading, time
import redis

port = int(sys.argv[1])
TRY_LOCK = ("if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
            "redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
            "return redis.call('pttl', KEYS[1]);")


def redisson_lock(key, owner, lease_ms, wait_ms=None):
    """Tries until acquired (returns the number of tries) or wait_ms passed (None)."""
    r = redis.Redis(port=port, socket_timeout=None)
    ps = r.pubsub()
    ps.subscribe(f"redisson_lock__channel:{{{key}}}")
    ps.get_message(timeout=1)
    end = None if wait_ms is None else time.monotonic() + wait_ms / 1000
    tries = 0
    while True:
        tries += 1
        ttl = r.eval(TRY_LOCK, 1, key, lease_ms, owner)
        if ttl is None:
            ps.close()
            return tries
        wait = max(ttl, 1) / 1000
        if end is not None:
            wait = min(wait, end - time.monotonic())
            if wait <= 0:
                ps.close()
                return None
        ps.get_message(timeout=wait)


def waits_until_the_queue_drains(run_s=5.0, workers=4):
    key = "check:busy"
    redis.Redis(port=port).delete(key)
    stop = time.monotonic() + run_s
    grants = [0]

    def worker(i):
        c = redis.Redis(port=port, socket_timeout=None)
        while time.monotonic() < stop:
            if c.execute_command("LOCK.ACQUIRE", key, f"w{i}", "PX", 1000, "BLOCK", 0) == 1:
                grants[0] += 1
                time.sleep(0.02)
                c.execute_command("LOCK.RELEASE", key, f"w{i}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(0.5)
    asked, before = time.monotonic(), grants[0]
    tries = redisson_lock(key, "redisson-uuid:1", 30000)
    got = time.monotonic()
    print(f"{workers} LOCK.* clients taking turns (hold 20 ms) for {run_s} s: the Redisson-style client asked at "
          f"{asked - t0:.1f} s, got the lock at {got - t0:.1f} s, after {grants[0] - before} LOCK.* grants ({tries} tries)")
    for t in threads:
        t.join()
    redis.Redis(port=port).delete(key)


def race_at_the_deadline(trials=40, lease=300):
    key = "check:deadline"
    admin = redis.Redis(port=port)
    wins = {"queue head": 0, "redisson": 0}
    for _ in range(trials):
        admin.delete(key)
        admin.execute_command("LOCK.ACQUIRE", key, "dead-holder", "PX", lease)
        res = {}

        def queued():
            c = redis.Redis(port=port, socket_timeout=None)
            res["q"] = c.execute_command("LOCK.ACQUIRE", key, "queued", "PX", 5000, "BLOCK", lease + 1000)

        tq = threading.Thread(target=queued)
        tq.start()
        time.sleep(0.02)
        # Neither lets go within the window: exactly one of the two gets the lock.
        got = redisson_lock(key, "redisson-uuid:1", 5000, wait_ms=lease + 1000)
        tq.join()
        assert (got is None) != (res["q"] is None), (got, res)
        wins["redisson" if got else "queue head"] += 1
    print(f"lease {lease} ms lapsed, one LOCK.* waiter queued, a Redisson-style client retrying after the PTTL; "
          f"first to get the lock in {trials} trials: {wins}")
    admin.delete(key)


def reentry_sets_the_lease():
    key = "check:reentry"
    r = redis.Redis(port=port)
    r.delete(key)
    assert r.eval(TRY_LOCK, 1, key, 30000, "uuid-1:7") is None
    before = r.pttl(key)
    n = r.execute_command("LOCK.ACQUIRE", key, "uuid-1:7", "PX", 1000)
    after = r.pttl(key)
    time.sleep(1.1)
    print(f"Redisson-held lock, lease {before} ms left; LOCK.ACQUIRE re-entry PX 1000 -> {n}, lease {after} ms; "
          f"1.1 s later it exists: {bool(r.exists(key))}")


waits_until_the_queue_drains()
race_at_the_deadline()
reentry_sets_the_lease()
