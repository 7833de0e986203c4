"""Shared by the checks: the README's path, a server started for one check."""
import pathlib, subprocess, tempfile, time
import redis

README = pathlib.Path(__file__).resolve().parents[3] / "README.md"


def start_server(binary, module, port, *config):
    """A server of its own (no persistence, in an empty dir of its own: an RDB
    left in its dir would be loaded, with a replication backlog that takes
    memory), killed by the caller (proc.kill())."""
    data = tempfile.mkdtemp(prefix="hashlock-check-")
    proc = subprocess.Popen([binary, "--port", str(port), "--dir", data, "--save", "", "--appendonly", "no",
                             "--loadmodule", module, *config],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=data)
    r = redis.Redis(port=port)
    for _ in range(200):
        try:
            r.ping()
            return proc, r
        except redis.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{binary} did not start on port {port}")
