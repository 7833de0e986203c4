# Usage (root: a private network namespace): unshare -n python3 scripts/keepalive/partition.py \
#   <redis-server|valkey-server> target/release/libhashlock.so <tcp-keepalive s> <timeout s>
# Checks the README, "Leases without a watchdog (KEEPALIVE)"'s partition figures.
# Runs inside a fresh network namespace (unshare -n): a KEEPALIVE holder on
# 127.0.0.2 is cut off (server->holder packets blackholed), a waiter on
# 127.0.0.1 waits; prints how long until the waiter gets the lock.
# (This blackholes on the server's own host, where an idle peer's silence is
# all that matters. A reply in flight is measured by inflight.py instead,
# with a real loss beyond the host: here the kernel would hold the reply
# back rather than lose it.)
import socket, subprocess, sys, time, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resp import cmd
server_bin, module, keepalive, idle_timeout = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
port = 7400
srv = subprocess.Popen([server_bin, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "no",
                        "--tcp-keepalive", keepalive, "--timeout", idle_timeout, "--loadmodule", module,
                        "--logfile", "/tmp/hashlock-partition-%s.log" % os.getpid()], stdout=subprocess.DEVNULL)
for _ in range(100):
    try:
        s = socket.create_connection(("127.0.0.1", port)); s.close(); break
    except OSError:
        time.sleep(0.05)
holder = socket.socket(); holder.bind(("127.0.0.2", 0)); holder.connect(("127.0.0.1", port))
holder.sendall(cmd("LOCK.ACQUIRE", "k", "holder", "PX", "60000", "KEEPALIVE")); print("holder:", holder.recv(100))
waiter = socket.create_connection(("127.0.0.1", port))
waiter.sendall(cmd("LOCK.ACQUIRE", "k", "waiter", "BLOCK", "0"))
time.sleep(0.3)
for c in (["ip", "rule", "add", "pref", "100", "table", "local"], ["ip", "rule", "del", "pref", "0", "table", "local"],
          ["ip", "rule", "add", "pref", "10", "to", "127.0.0.2", "blackhole"]):
    subprocess.run(c, check=True)
t0 = time.monotonic()
waiter.settimeout(1200)
r = waiter.recv(100)
t1 = time.monotonic()
print("waiter:", r, "after %.2f s of partition (tcp-keepalive %s, timeout %s)" % (t1 - t0, keepalive, idle_timeout))
admin = socket.create_connection(("127.0.0.1", port)); admin.sendall(cmd("INFO", "lock")); time.sleep(0.1)
print([l for l in admin.recv(4000).decode().split("\r\n") if "keepalive" in l])
srv.kill()
