"""`make demo-python`: the overselling example (库存超卖) with the Python
library, the twin of `make demo` (bench/src/bin/demo.rs).

1. 20 buyers (threads) x 50 attempts on a stock of 100, read-modify-write
   with no lock: GET stock -> if > 0, SET stock - 1. It oversells.
2. The same inside `with hashlock.Lock(...)`: exactly 100.
3. A buyer process takes the lock and is killed (SIGKILL). With KEEPALIVE
   the next buyer gets the lock at once; on a module without KEEPALIVE, at
   the dead buyer's lease deadline.

    python oversell.py              # starts its own redis-server with the module
    python oversell.py --port 6380  # or uses a running server (e.g. `make run`)
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
import hashlock  # noqa: E402

STOCK, BUYERS, ATTEMPTS = 100, 20, 50
STOCK_KEY, LOCK_KEY = "stock", "stock:lock"
CRASH_LEASE_MS = 2000


def start_server():
    module = os.environ.get("HASHLOCK_MODULE") or os.path.join(
        os.path.dirname(__file__), "..", "..", "..", "target", "release", "libhashlock.so"
    )
    if not os.path.isfile(module):
        sys.exit(f"module {module} not found: run `cargo build --release` (or `make demo-python`)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = tempfile.mkdtemp(prefix="hashlock-demo-")
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", tmp, "--save", "",
         "--appendonly", "no", "--loadmodule", os.path.abspath(module)],
        stdout=subprocess.DEVNULL,
    )
    for _ in range(500):
        try:
            redis.Redis(port=port).ping()
            return port, proc, tmp
        except redis.ConnectionError:
            time.sleep(0.02)
    proc.kill()
    sys.exit("redis-server did not start")


def supports_keepalive(r) -> bool:
    try:
        r.execute_command("LOCK.ACQUIRE", "demo:probe", "probe", "PX", 1000, "KEEPALIVE")
        r.execute_command("LOCK.RELEASE", "demo:probe", "probe")
        return True
    except redis.ResponseError:
        return False


def buyers(r, locked: bool, keepalive: bool):
    sales, sales_lock = [], threading.Lock()

    def sell(n):
        # The business logic, unchanged: check, deduct, write.
        stock = int(r.get(STOCK_KEY))
        if stock > 0:
            r.set(STOCK_KEY, stock - 1)
            with sales_lock:
                sales.append((n, stock))

    def buyer(n):
        lock = hashlock.Lock(r, LOCK_KEY, lease_ms=5000, keepalive=keepalive)  # one owner per buyer
        for _ in range(ATTEMPTS):
            if not locked:
                sell(n)
                continue
            with lock:
                sell(n)

    threads = [threading.Thread(target=buyer, args=(n,)) for n in range(1, BUYERS + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sales


def hold_and_wait(port: int, keepalive: bool) -> None:
    lock = hashlock.Lock(redis.Redis(port=port), LOCK_KEY, lease_ms=CRASH_LEASE_MS, keepalive=keepalive)
    lock.acquire()
    print("held", flush=True)
    time.sleep(60)


def crash(r, port: int, keepalive: bool) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    args = [sys.executable, __file__, "--hold-and-wait", "--port", str(port)] + (["--keepalive"] if keepalive else [])
    holder = subprocess.Popen(args, stdout=subprocess.PIPE, env=env)
    assert holder.stdout.readline() == b"held\n"
    waiter = hashlock.Lock(r, LOCK_KEY, lease_ms=5000, keepalive=keepalive)
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("ok", waiter.acquire(timeout=10)))
    t.start()
    while (waiter.info() or hashlock.LockInfo("", 0, 0, 0)).waiters < 1:
        time.sleep(0.01)
    killed = time.monotonic()
    holder.kill()
    holder.wait()
    t.join()
    took_ms = (time.monotonic() - killed) * 1000
    waiter.release()
    how = "KEEPALIVE: its connection closed, the server released the lock" if keepalive else (
        f"no KEEPALIVE in this module: the lease ({CRASH_LEASE_MS} ms) ran out")
    print(f"   {'✓' if got.get('ok') else '✗'} the waiting buyer got the lock {took_ms:.0f} ms after the kill ({how})")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int)
    ap.add_argument("--hold-and-wait", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--keepalive", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.hold_and_wait:
        hold_and_wait(args.port, args.keepalive)
        return 0
    server = None
    port = args.port
    if port is None:
        port, proc, tmp = start_server()
        server = (proc, tmp)
    try:
        r = redis.Redis(port=port, max_connections=BUYERS * 3)
        keepalive = supports_keepalive(r)
        print(f"hashlock demo (Python) — overselling (库存超卖) · server 127.0.0.1:{port} "
              f"{r.info('server')['redis_version']} · KEEPALIVE {'on' if keepalive else 'not in this module: watchdog threads'}")
        print(f"stock: {STOCK} items · {BUYERS} buyers x {ATTEMPTS} attempts, all at once\n")

        print("1. Without a lock: GET stock -> if > 0: SET stock (stock - 1)")
        r.set(STOCK_KEY, STOCK)
        sold = len(buyers(r, locked=False, keepalive=keepalive))
        left = int(r.get(STOCK_KEY))
        verdict = f"✗ OVERSOLD by {sold - STOCK}" if sold > STOCK else "no oversell this time"
        print(f"   sold {sold} items from a stock of {STOCK}: {verdict} (stock now {left})\n")

        print("2. With hashlock: `with hashlock.Lock(r, 'stock:lock'):` around the same code")
        r.set(STOCK_KEY, STOCK)
        started = time.monotonic()
        sold = len(buyers(r, locked=True, keepalive=keepalive))
        left = int(r.get(STOCK_KEY))
        ok = sold == STOCK and left == 0
        print(f"   {'✓' if ok else '✗'} sold exactly {sold} of {STOCK} · stock left {left} · "
              f"{time.monotonic() - started:.2f} s\n")

        print("3. A buyer process takes the lock and is killed (SIGKILL) while holding it")
        crash(r, port, keepalive)
        return 0 if ok else 1
    finally:
        if server:
            server[0].kill()
            server[0].wait()
            shutil.rmtree(server[1], ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
