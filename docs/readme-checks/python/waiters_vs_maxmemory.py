"""Waiters' memory counts against maxmemory (README: Deployment): maxmemory
= used + 2 MB, noeviction, then 200 connections try to wait for a held lock;
then which commands a full server still serves.
Usage: waiters_vs_maxmemory.py SERVER_BINARY MODULE_PATH PORT"""
import socket, sys, time
import redis
from common import start_server

binary, module, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
proc, r = start_server(binary, module, port, "--maxmemory-policy", "noeviction")
try:
    r.execute_command("LOCK.ACQUIRE", "k", "holder", "PX", 600000)
    r.config_set("maxmemory", r.info("memory")["used_memory"] + 2 * 1024 * 1024)
    socks = []
    for i in range(200):
        s = socket.create_connection(("127.0.0.1", port))
        owner = f"w{i:03}".encode()
        s.sendall(b"*7\r\n$12\r\nLOCK.ACQUIRE\r\n$1\r\nk\r\n$%d\r\n%s\r\n$2\r\nPX\r\n$4\r\n1000\r\n$5\r\nBLOCK\r\n$1\r\n0\r\n"
                  % (len(owner), owner))
        socks.append(s)
    time.sleep(0.5)
    m = r.info("memory")
    print(f"waiting: {r.info('lock')['lock_waiting']} of 200; used_memory - maxmemory: "
          f"{(m['used_memory'] - m['maxmemory']) // 1024} KiB")
    for cmd in (("SET", "x", "y"), ("LOCK.ACQUIRE", "other", "me", "PX", 1000),
                ("LOCK.RENEW", "k", "holder", "PX", 600000), ("LOCK.RELEASE", "k", "holder")):
        try:
            print(cmd[0], "->", r.execute_command(*cmd))
        except redis.ResponseError as e:
            print(cmd[0], "->", e)
finally:
    proc.kill()
    proc.wait()
