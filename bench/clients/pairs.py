"""make bench B11, Python: one Lock (the default: KEEPALIVE, blocking
acquire), acquire + release in a loop on one thread (sync) or task
(asyncio), for SECONDS after a warm-up. Prints one JSON line: pairs, seconds
and the connections the server accepted meanwhile (INFO stats, read on the
user's own client, so the count is the library's).

    python pairs.py PORT SECONDS sync|asyncio [path to hashlock's src]
"""

import asyncio
import json
import os
import sys
import time

port, seconds, mode = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, sys.argv[4] if len(sys.argv) > 4 else os.path.join(here, "..", "..", "clients", "python", "src"))

import redis  # noqa: E402

import hashlock  # noqa: E402

KEY = "bench:b11:python-" + mode
WARMUP = 50


def received(info) -> int:
    return int(info["total_connections_received"])


def run_sync():
    r = redis.Redis(port=port)
    lock = hashlock.Lock(r, KEY)
    for _ in range(WARMUP):
        lock.acquire()
        lock.release()
    before = received(r.info("stats"))
    n, t0 = 0, time.perf_counter()
    while True:
        lock.acquire()
        lock.release()
        n += 1
        if n % 64 == 0 and time.perf_counter() - t0 >= seconds:
            break
    took = time.perf_counter() - t0
    return n, took, received(r.info("stats")) - before


async def run_asyncio():
    import redis.asyncio
    from hashlock.asyncio import Lock

    r = redis.asyncio.Redis(port=port)
    lock = Lock(r, KEY)
    for _ in range(WARMUP):
        await lock.acquire()
        await lock.release()
    before = received(await r.info("stats"))
    n, t0 = 0, time.perf_counter()
    while True:
        await lock.acquire()
        await lock.release()
        n += 1
        if n % 64 == 0 and time.perf_counter() - t0 >= seconds:
            break
    took = time.perf_counter() - t0
    after = received(await r.info("stats"))
    await r.aclose()
    return n, took, after - before


n, took, conns = run_sync() if mode == "sync" else asyncio.run(run_asyncio())
print(json.dumps({"pairs": n, "seconds": took, "connections": conns}))
