"""Real Redis / Valkey servers for the tests: a free loopback port, a temp
dir, the module loaded; killed when stopped. Binaries: `redis-server` on
PATH (or $REDIS_SERVER) and $VALKEY_SERVER; the module: $HASHLOCK_MODULE."""

import atexit
import os
import shutil
import socket
import subprocess
import tempfile
import time

import redis

KINDS = ("redis", "valkey")
READY_TIMEOUT_S = 10


def binary(kind: str) -> str:
    if kind == "redis":
        path = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")
        hint = "install redis-server or set REDIS_SERVER"
    else:
        path = os.environ.get("VALKEY_SERVER")
        hint = "set VALKEY_SERVER (make test-clients does)"
    if not path or not os.path.isfile(path):
        raise RuntimeError(f"{kind} server binary not found ({path!r}): {hint}")
    return path


def module_path() -> str:
    path = os.environ.get("HASHLOCK_MODULE")
    if not path or not os.path.isfile(path):
        raise RuntimeError(
            f"HASHLOCK_MODULE={path!r} is not a file: run `cargo build --release` and set it (make test-clients does)"
        )
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, kind: str, module: bool = True, **config: str) -> None:
        # The module's lifecycle events (Election observers, the loss
        # signal), as the shipped redis.conf has them; notify_keyspace_events=""
        # turns them off.
        config.setdefault("notify_keyspace_events", "Kd")
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix=f"hashlock-py-{kind}-")
        for attempt in range(5):
            self.port = free_port()
            args = [
                binary(kind),
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--dir", self.dir,
                "--save", "",
                "--appendonly", "no",
                "--logfile", "server.log",
                "--enable-module-command", "local",
                "--enable-debug-command", "local",
            ]
            if module:
                args += ["--loadmodule", module_path()]
            for name, value in config.items():
                args += [f"--{name.replace('_', '-')}", value]
            self.proc = subprocess.Popen(args, cwd=self.dir, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
            if self._wait_ready():
                # Even if the session dies before stop(): no server outlives it.
                atexit.register(self.stop)
                return
            self.proc.kill()
            self.proc.wait()
        raise RuntimeError(f"{kind} server did not start; log:\n{self.log()}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False  # e.g. the port was taken meanwhile: retry
            try:
                if redis.Redis(port=self.port, socket_timeout=1).ping():
                    return True
            except redis.ConnectionError:
                time.sleep(0.02)
        return False

    def client(self, **kwargs) -> redis.Redis:
        return redis.Redis(port=self.port, **kwargs)

    def log(self) -> str:
        try:
            with open(os.path.join(self.dir, "server.log")) as f:
                return f.read()[-4000:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
