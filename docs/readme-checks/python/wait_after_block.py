"""WAIT after a BLOCK grant covers the grant (README: Deployment): a primary
and a replica of its own; the replica is stopped (SIGSTOP) before the grant.
Usage: wait_after_block.py SERVER_BINARY MODULE_PATH PRIMARY_PORT REPLICA_PORT"""
import os, signal, sys, threading, time
import redis
from common import start_server

binary, module, pport, rport = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
primary, p = start_server(binary, module, pport)
replica, rep = start_server(binary, module, rport, "--replicaof", "127.0.0.1", str(pport))
try:
    while rep.info("replication")["master_link_status"] != "up":
        time.sleep(0.1)
    p.execute_command("LOCK.ACQUIRE", "k", "holder", "PX", 30000)
    print("immediate grant, then WAIT 1 500 ->", p.execute_command("LOCK.ACQUIRE", "k2", "me", "PX", 30000), p.wait(1, 500))
    waiter, out = redis.Redis(port=pport, socket_timeout=None), {}
    t = threading.Thread(target=lambda: out.update(
        r=waiter.execute_command("LOCK.ACQUIRE", "k", "waiter", "PX", 30000, "BLOCK", 10000)))
    t.start()
    time.sleep(0.2)
    os.kill(replica.pid, signal.SIGSTOP)
    p.execute_command("LOCK.RELEASE", "k", "holder")
    t.join()
    print(f"granted after BLOCK: {out['r']}; replica stopped: WAIT 1 500 on the waiter's connection -> {waiter.wait(1, 500)}")
    os.kill(replica.pid, signal.SIGCONT)
    print("replica resumed: WAIT 1 2000 ->", waiter.wait(1, 2000))
finally:
    for proc in (replica, primary):
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()
