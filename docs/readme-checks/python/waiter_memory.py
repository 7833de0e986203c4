"""used_memory per client (README: Deployment): idle connections, then each
blocked in LOCK.ACQUIRE ... BLOCK 0 (the lock held), or in BLPOP.
Usage: waiter_memory.py SERVER_BINARY MODULE_PATH PORT [CLIENTS=500]"""
import socket, subprocess, sys, time
from common import start_server

binary, module, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
n = int(sys.argv[4]) if len(sys.argv) > 4 else 500


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def measure(command):
    proc, r = start_server(binary, module, port, "--maxclients", "10000")
    try:
        r.execute_command("LOCK.ACQUIRE", "k", "holder", "PX", 600000)
        used = lambda: r.info("memory")["used_memory"]
        time.sleep(0.2)
        m0 = used()
        socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(resp("PING"))
            s.recv(16)
            socks.append(s)
        time.sleep(0.2)
        m1 = used()
        for i, s in enumerate(socks):
            s.sendall(resp(*command(i)))
        deadline = time.time() + 20
        while int(r.info("clients")["blocked_clients"]) < n and time.time() < deadline:
            time.sleep(0.05)
        assert int(r.info("clients")["blocked_clients"]) == n
        time.sleep(0.2)
        m2 = used()
        for s in socks:
            s.close()
        return (m1 - m0) / n, (m2 - m1) / n
    finally:
        proc.kill()
        proc.wait()


version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.split()[2]
for name, command in [("LOCK.ACQUIRE k <owner> PX 30000 BLOCK 0", lambda i: ("LOCK.ACQUIRE", "k", f"owner-{i:08}", "PX", 30000, "BLOCK", 0)),
                      ("BLPOP list 0", lambda i: ("BLPOP", "list", 0))]:
    idle, blocked = measure(command)
    print(f"{binary.rsplit('/', 1)[-1]} {version}, {n} clients: idle {idle / 1024:.1f} KiB, "
          f"blocked in {name}: +{blocked / 1024:.1f} KiB = {(idle + blocked) / 1024:.1f} KiB per client")
