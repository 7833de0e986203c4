"""Redisson's lock scripts, read from the one copy the Rust tests use
(crates/testkit/src/redisson.rs), so every test speaks the same protocol."""

import os
import re

_SOURCE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "crates", "testkit", "src", "redisson.rs")


def _consts():
    with open(_SOURCE) as f:
        text = f.read()
    found = {}
    for name, body in re.findall(r'pub const (\w+): &str = "(.*?)";', text, re.S):
        # A Rust "\<newline>" continuation drops the newline and the next
        # line's leading whitespace.
        found[name] = re.sub(r"\\\n\s*", "", body)
    return found


_C = _consts()
TRY_LOCK = _C["TRY_LOCK"]
UNLOCK = _C["UNLOCK"]
UNLOCK_MESSAGE = _C["UNLOCK_MESSAGE"]


def channel(key: str) -> str:
    return f"redisson_lock__channel:{key}" if "{" in key else f"redisson_lock__channel:{{{key}}}"


def try_lock(r, key, owner, lease_ms=30000):
    """None = acquired (or re-entered), else the PTTL of the holder's lease."""
    return r.eval(TRY_LOCK, 1, key, lease_ms, owner)


def unlock(r, key, owner, lease_ms=30000):
    """None = not held by owner, 0 = still held, 1 = freed."""
    return r.eval(UNLOCK, 2, key, channel(key), UNLOCK_MESSAGE, lease_ms, owner)
