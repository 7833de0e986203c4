# Usage: python3 scripts/keepalive/walkthrough.py <port of a server with the module>
# The README walk-through (two interactive redis-cli, Ctrl-C the holder), typed on pseudo-terminals.
# Two interactive redis-cli sessions on pseudo-terminals, as a user would
# type them; Ctrl-C in the holder's terminal.
import os, pty, select, sys, time, re
port = sys.argv[1]
def spawn():
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm"
        os.execvp("redis-cli", ["redis-cli", "-p", port])
    return pid, fd
def typed(fd, line):
    for ch in line:
        os.write(fd, ch.encode()); read(fd, 0.01)
    os.write(fd, b"\r")
def read(fd, secs):
    out = b""; end = time.time() + secs
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], max(0, end - time.time()))
        if not r: break
        try: chunk = os.read(fd, 4096)
        except OSError: break
        if not chunk: break
        # linenoise asks the terminal where the cursor is: answer as one would.
        if b"\x1b[6n" in chunk:
            os.write(fd, b"\x1b[1;20R")
        out += chunk
    return out.decode(errors="replace")
def clean(s):
    # Keep what a user sees last on each line (linenoise redraws the line).
    s = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", s)
    return "\n".join(l.split("\r")[-1] if l.split("\r")[-1] else (l.split("\r")[-2] if "\r" in l else l) for l in s.split("\n"))
a_pid, a = spawn(); b_pid, b = spawn(); time.sleep(0.5); read(a, 0.3); read(b, 0.3)
typed(a, "LOCK.ACQUIRE orders:42 * KEEPALIVE BLOCK 10000"); print("A>", clean(read(a, 1.0)))
typed(b, "LOCK.ACQUIRE orders:42 * KEEPALIVE BLOCK 0"); print("B (waiting)>", clean(read(b, 1.0)))
typed(a, "LOCK.INFO orders:42"); print("A>", clean(read(a, 1.0)))
t0 = time.time(); os.write(a, b"\x03")
out = b""
r, _, _ = select.select([b], [], [], 5.0); t1 = time.time()
out = read(b, 0.5)
print("A after Ctrl-C: exited =", os.waitpid(a_pid, os.WNOHANG)[0] == a_pid)
print("B> %s (first byte %.1f ms after the Ctrl-C)" % (clean(out), (t1 - t0) * 1000))
typed(b, "LOCK.INFO orders:42"); print("B>", clean(read(b, 1.0)))
os.kill(b_pid, 9)
