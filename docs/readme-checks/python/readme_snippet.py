"""Runs the README's redis-py snippet verbatim against make run's server
(port 6380): another owner holds the lock 7 s (past redis-py's default 5 s
timeout: must still be acquired), then 12 s (past BLOCK: must return
without acquiring and without an exception)."""
import re, threading, time
import redis
from common import README

snippet = re.search(r"\*\*Python \(redis-py\)\*\*\n\n```python\n(.*?)```", README.read_text(), re.S).group(1)
admin = redis.Redis(port=6380)
for hold_s in (7, 12):
    admin.delete("orders:42")
    admin.execute_command("LOCK.ACQUIRE", "orders:42", "other", "PX", 60000)
    threading.Timer(hold_s, lambda: admin.execute_command("LOCK.RELEASE", "orders:42", "other")).start()
    worked, t = [], time.monotonic()
    try:
        exec(snippet, {"do_work": lambda: worked.append(time.monotonic() - t)})
        print(f"held {hold_s} s by another owner: " +
              (f"acquired, do_work ran after {worked[0]:.1f} s" if worked
               else f"not acquired after {time.monotonic() - t:.1f} s, no exception"))
    except Exception as e:
        print(f"held {hold_s} s by another owner: {type(e).__name__}: {e}")
    time.sleep(max(0.0, hold_s - (time.monotonic() - t)) + 0.2)
print("afterwards LOCK.INFO orders:42 ->", admin.execute_command("LOCK.INFO", "orders:42"))
