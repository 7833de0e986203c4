"""Which maxmemory policies evict held locks (README: Deployment)? For each
policy, a fresh server: 100 locks (LOCK.ACQUIRE, PX 10 min), then maxmemory
= used + 1 MB, then 5000 plain 1 KB strings without TTL.
Usage: eviction.py SERVER_BINARY MODULE_PATH PORT"""
import sys
import redis
from common import start_server

binary, module, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
for policy in ["noeviction", "allkeys-lru", "allkeys-lfu", "allkeys-random",
               "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"]:
    proc, r = start_server(binary, module, port, "--maxmemory-policy", policy)
    try:
        for i in range(100):
            assert r.execute_command("LOCK.ACQUIRE", f"lock:{i}", f"owner-{i}", "PX", 600000) == 1
        r.config_set("maxmemory", r.info("memory")["used_memory"] + 1024 * 1024)
        refused = 0
        for i in range(5000):
            try:
                r.set(f"fill:{i}", b"x" * 1000)
            except redis.ResponseError:
                refused += 1
        locks = sum(r.exists(f"lock:{i}") for i in range(100))
        print(f"{policy:16} locks left {locks:3}/100, plain strings kept {r.dbsize() - locks:4}/5000, "
              f"writes refused (OOM) {refused:4}")
    finally:
        proc.kill()
        proc.wait()
