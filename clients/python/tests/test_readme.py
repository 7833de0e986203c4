"""The README's examples, run as written (only the port is changed and
ship_order is supplied), so a new user can copy them."""

import asyncio
import os
import re

import pytest

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def blocks():
    with open(README) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


@pytest.mark.module_feature  # the examples use the default, keepalive=True
def test_sync_example(server):
    code = blocks()[0].replace("port=6380", f"port={server.port}")
    shipped = []
    exec(compile(code, "README.md", "exec"), {"ship_order": shipped.append})
    assert shipped == [42, 43]


@pytest.mark.module_feature
def test_asyncio_example(server):
    code = blocks()[1].replace("port=6380", f"port={server.port}")
    shipped = []

    async def ship_order(n):
        shipped.append(n)

    body = "import redis.asyncio\nasync def main():\n" + "".join(f"    {line}\n" for line in code.splitlines())
    scope = {"ship_order": ship_order}
    exec(compile(body, "README.md", "exec"), scope)
    asyncio.run(scope["main"]())
    assert shipped == [42]


@pytest.mark.module_feature
def test_family_example(server):
    code = blocks()[2].replace("port=6380", f"port={server.port}")
    done = []
    scope = {name: (lambda name=name: done.append(name)) for name in ("call_api", "update_catalog", "read_catalog")}
    scope["transfer"] = lambda a, b: done.append(("transfer", a, b))
    exec(compile(code, "README.md", "exec"), scope)
    assert done == ["call_api", "update_catalog", "read_catalog", ("transfer", 1, 2)]
