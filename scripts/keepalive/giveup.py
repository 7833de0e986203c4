# Usage: python3 scripts/keepalive/giveup.py <port of a server with the module>
# A client whose library gives up on a BLOCK (client-side timeout) but keeps
# the connection (a pool): the server still hands it the lock later, tied to
# that connection, and renews it for as long as the connection lives.
import os, socket, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resp import cmd
port = int(sys.argv[1])
def call(s, *a):
    s.sendall(cmd(*a)); time.sleep(0.05); return s.recv(4096)
admin = socket.create_connection(("127.0.0.1", port))
holder = socket.create_connection(("127.0.0.1", port))
print("holder:", call(holder, "LOCK.ACQUIRE", "gu", "holder", "PX", "30000", "KEEPALIVE"))
pooled = socket.create_connection(("127.0.0.1", port))
pooled.sendall(cmd("LOCK.ACQUIRE", "gu", "app-1", "PX", "3000", "KEEPALIVE", "BLOCK", "0"))
pooled.settimeout(1.0)
try:
    pooled.recv(100)
except socket.timeout:
    print("client-side timeout after 1 s: the app gives up, the connection goes back to the pool")
print("holder releases:", call(holder, "LOCK.RELEASE", "gu", "holder"))
other = socket.create_connection(("127.0.0.1", port))
other.sendall(cmd("LOCK.ACQUIRE", "gu", "app-2", "BLOCK", "8000"))
for i in range(4):
    time.sleep(2)
    print("t=+%ds" % (2 * (i + 1)), call(admin, "LOCK.INFO", "gu").replace(b"\r\n", b" ")[:140])
other.settimeout(10)
print("app-2 gets:", other.recv(100), "(nil: timed out after 8 s while app-1's abandoned connection held a 3 s lease)")
pooled.close()
time.sleep(0.1)
print("after closing the pooled connection:", call(admin, "LOCK.INFO", "gu")[:30])
