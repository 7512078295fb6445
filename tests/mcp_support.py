"""What the MCP tests share: the real servers (npm binaries, the SDK test server) and
helpers to read what the model was sent."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
TEST_SERVER = str(REPO / "tests" / "data" / "mcp_test_server.py")
_NPM_BIN = REPO / ".ci" / "node" / "node_modules" / ".bin"


def npm_binary(name: str) -> str:
    """A real MCP server from npm: .ci/node (what .ci/run installs), else PATH. Missing in CI
    is a failure, not a skip."""
    local = _NPM_BIN / name
    found = str(local) if local.exists() else shutil.which(name)
    if found:
        return found
    message = f"{name} is not installed (bash .ci/run installs it into .ci/node/)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def sdk_server(**extra: Any) -> dict[str, Any]:
    """The SDK-built test server (tests/data/mcp_test_server.py) as an mcp_servers entry."""
    return {"command": sys.executable, "args": [TEST_SERVER], "approval": "allow", **extra}


def everything(**extra: Any) -> dict[str, Any]:
    return {"command": npm_binary("mcp-server-everything"), "approval": "allow", **extra}


def sent_tool_names(body: dict[str, Any]) -> list[str]:
    """Tool names in a request body of any of the three wire formats."""
    return [t.get("name") or t["function"]["name"] for t in body.get("tools", [])]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def everything_http() -> Any:
    """`mcp-server-everything streamableHttp` on a free port; yields its /mcp URL."""
    return everything_served("streamableHttp", "/mcp")


def everything_sse() -> Any:
    """`mcp-server-everything sse` (the HTTP+SSE transport); yields its /sse URL."""
    return everything_served("sse", "/sse")


@contextmanager
def everything_served(transport: str, path: str) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [npm_binary("mcp-server-everything"), transport],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError("mcp-server-everything exited at start") from None
                time.sleep(0.05)
        else:
            raise RuntimeError("mcp-server-everything did not open its port")
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        process.terminate()
        process.wait(10)
