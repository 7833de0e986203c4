"""`make demo-python` stays runnable: examples/oversell.py against the test
server sells exactly the stock with the lock and hands a killed buyer's lock
on (at once with KEEPALIVE, else at its lease deadline)."""

import os
import subprocess
import sys

DEMO = os.path.join(os.path.dirname(__file__), "..", "examples", "oversell.py")


def test_oversell_demo(server):
    out = subprocess.run(
        [sys.executable, DEMO, "--port", str(server.port)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "✓ sold exactly 100 of 100 · stock left 0" in out.stdout
    assert "✓ the waiting buyer got the lock" in out.stdout
