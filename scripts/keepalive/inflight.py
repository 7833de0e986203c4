# Usage (root): python3 scripts/keepalive/inflight.py \
#   <redis-server|valkey-server> target/release/libhashlock.so <tcp_retries2> [tcp-keepalive s]
# Checks the README's "reply in flight" figures (Leases without a watchdog
# (KEEPALIVE), Hazards, 2): how long a KEEPALIVE holder that vanished with a
# reply in flight keeps its lock.
#
# Method: two network namespaces joined by a veth pair, a real loss beyond
# the server's host. The server (and a waiter) run in one, 10.77.0.1; the
# holder in the other, 10.77.0.2. The holder takes the lock with KEEPALIVE,
# sends `BLPOP` on an empty list with a 1 s timeout, and its own address is
# removed in its namespace at once: 1 s later the server sends the reply (nil),
# which is lost on the holder's side (nothing there owns 10.77.0.2 any more:
# no ACK, no RST). The server's TCP retransmits it with exponential backoff
# until tcp_retries2 (set in the server's namespace only) gives up, then
# closes the connection, and the KEEPALIVE lock goes to the waiter. Prints
# the time from the reply to the waiter's grant.
#
# (A blackhole route on the server's own host is not the same: there the
# kernel holds the reply back, and the timeouts it shows are longer.)
import ctypes, os, socket, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resp import cmd

server_bin, module, retries = sys.argv[1], sys.argv[2], sys.argv[3]
keepalive = sys.argv[4] if len(sys.argv) > 4 else "300"
tag = str(os.getpid())
SRV, CLI = "hl-srv-" + tag, "hl-cli-" + tag
VS, VC = "hls" + tag, "hlc" + tag
SRV_IP, CLI_IP, PORT = "10.77.0.1", "10.77.0.2", 7400
CLONE_NEWNET = 0x40000000
libc = ctypes.CDLL(None, use_errno=True)


def sh(*args):
    subprocess.run(list(args), check=True)


def enter(ns):
    """Switches this thread to network namespace `ns` (sockets made after
    it live there)."""
    fd = os.open("/var/run/netns/" + ns, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns " + ns)
    finally:
        os.close(fd)


def recv_reply(s):
    return s.recv(4096)


home = os.open("/proc/self/ns/net", os.O_RDONLY)
srv = None
try:
    sh("ip", "netns", "add", SRV)
    sh("ip", "netns", "add", CLI)
    sh("ip", "link", "add", VS, "type", "veth", "peer", "name", VC)
    sh("ip", "link", "set", VS, "netns", SRV)
    sh("ip", "link", "set", VC, "netns", CLI)
    for ns, dev, ip in ((SRV, VS, SRV_IP), (CLI, VC, CLI_IP)):
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "addr", "add", ip + "/24", "dev", dev)
        sh("ip", "-n", ns, "link", "set", dev, "up")
    sh("ip", "netns", "exec", SRV, "sysctl", "-q", "-w", "net.ipv4.tcp_retries2=" + retries)
    log = "/tmp/hashlock-inflight-%s.log" % tag
    srv = subprocess.Popen(
        ["ip", "netns", "exec", SRV, server_bin, "--port", str(PORT), "--bind", SRV_IP, "--save", "",
         "--appendonly", "no", "--protected-mode", "no", "--tcp-keepalive", keepalive,
         "--loadmodule", os.path.abspath(module), "--logfile", log],
        stdout=subprocess.DEVNULL)
    enter(SRV)
    for _ in range(200):
        try:
            socket.create_connection((SRV_IP, PORT), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    waiter = socket.create_connection((SRV_IP, PORT))
    admin = socket.create_connection((SRV_IP, PORT))
    enter(CLI)
    holder = socket.create_connection((SRV_IP, PORT))
    enter(SRV)
    holder.sendall(cmd("LOCK.ACQUIRE", "k", "holder", "PX", "60000", "KEEPALIVE"))
    print("holder:", recv_reply(holder))
    waiter.sendall(cmd("LOCK.ACQUIRE", "k", "waiter", "BLOCK", "0"))
    time.sleep(0.3)
    # A reply due in 1 s; meanwhile the holder vanishes: its address is
    # gone from its own namespace.
    holder.sendall(cmd("BLPOP", "nothing", "1"))
    sent = time.monotonic()
    sh("ip", "-n", CLI, "addr", "del", CLI_IP + "/24", "dev", VC)
    cut = time.monotonic() - sent
    if cut > 0.5:
        sys.exit("removing the address took %.2f s: too slow for a 1 s BLPOP" % cut)
    t0 = sent + 1.0
    time.sleep(1.5)
    admin.sendall(cmd("CLIENT", "LIST"))
    listing = recv_reply(admin).decode(errors="replace")
    print("holder's connection on the server after the reply was sent:",
          [l.split(" cmd=")[1].split(" ")[0] for l in listing.split("\n") if CLI_IP in l])
    waiter.settimeout(3600)
    r = recv_reply(waiter)
    t1 = time.monotonic()
    print("waiter:", r, "after %.1f s with a reply in flight (tcp_retries2 %s in the server's namespace, tcp-keepalive %s)"
          % (t1 - t0, retries, keepalive))
    admin.sendall(cmd("INFO", "lock"))
    time.sleep(0.1)
    print([l for l in recv_reply(admin).decode().split("\r\n") if "keepalive" in l])
finally:
    if home is not None:
        libc.setns(home, CLONE_NEWNET)
    if srv is not None:
        srv.kill()  # `ip netns exec` execs the server: this is its pid
        srv.wait()
    for ns in (SRV, CLI):
        subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
