"""redis-py's defaults against LOCK.ACQUIRE ... BLOCK while another owner
holds the lock: how long until the call returns or raises, and how many
times it joined the queue (INFO lock: blocked).
Usage: redis_py_timeout.py PORT BLOCK_MS   (README: BLOCK 30000 -> TimeoutError
after ~59 s, 11 queue entries)."""
import sys, time
import redis

port, block = int(sys.argv[1]), int(sys.argv[2])
admin = redis.Redis(port=port)
admin.delete("check:py")
admin.execute_command("LOCK.ACQUIRE", "check:py", "holder", "PX", 600000)
before = admin.info("lock")
r = redis.Redis(port=port)  # defaults
print("redis-py", redis.__version__, "socket_timeout", r.connection_pool.connection_kwargs.get("socket_timeout"))
t = time.monotonic()
try:
    out = r.execute_command("LOCK.ACQUIRE", "check:py", "waiter", "PX", 30000, "BLOCK", block)
    print(f"BLOCK {block}: reply {out!r} after {time.monotonic() - t:.1f} s")
except Exception as e:
    print(f"BLOCK {block}: {type(e).__name__}: {e} after {time.monotonic() - t:.1f} s")
after = admin.info("lock")
print("queue entries made:", after["lock_blocked"] - before["lock_blocked"],
      "left by disconnecting:", after["lock_disconnected"] - before["lock_disconnected"])
admin.delete("check:py")
