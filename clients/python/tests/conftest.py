import os
import sys
import time
import uuid

import pytest

from hashlock._protocol import parse_info

sys.path.insert(0, os.path.dirname(__file__))
from servers import KINDS, Server  # noqa: E402

#: Generous: the machine is loaded; what matters is the order of magnitude.
WAIT_S = 10


@pytest.fixture(scope="session", params=KINDS)
def server(request):
    s = Server(request.param)
    yield s
    s.stop()


@pytest.fixture
def r(server):
    c = server.client()
    yield c
    c.close()


@pytest.fixture
def key():
    return f"lock:{uuid.uuid4().hex[:12]}"


def wait_for(predicate, timeout=WAIT_S, interval=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def waiters(r, key) -> int:
    """LOCK.INFO's waiter count (0 when the lock is free)."""
    info = parse_info(r.execute_command("LOCK.INFO", key))
    return 0 if info is None else info.waiters
