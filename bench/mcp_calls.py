"""MCP costs: server start, one tool call through talaria against the SDK client alone (the
floor), and what having servers configured costs `import talaria` + `Agent(...)`.

    python bench/mcp_calls.py [--calls 200]

Needs `mcp-server-everything` on PATH or in .ci/node (what .ci/run installs).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def everything() -> str:
    local = REPO / ".ci" / "node" / "node_modules" / ".bin" / "mcp-server-everything"
    found = str(local) if local.exists() else shutil.which("mcp-server-everything")
    if not found:
        sys.exit("mcp-server-everything is not installed")
    return found


async def floor(command: str, calls: int) -> float:
    from mcp import Client, StdioServerParameters

    async with Client(StdioServerParameters(command=command)) as client:
        await client.call_tool("echo", {"message": "warm"})
        started = time.perf_counter()
        for _ in range(calls):
            await client.call_tool("echo", {"message": "hi"})
        return (time.perf_counter() - started) / calls


def through_talaria(command: str, calls: int) -> tuple[float, float]:
    from talaria.mcp.config import parse_servers
    from talaria.mcp.manager import MCPManager
    from talaria.mcp.tools import build_tools

    manager = MCPManager(parse_servers({"ev": {"command": command}}), Path(tempfile.mkdtemp()))
    try:
        started = time.perf_counter()
        asyncio.run(manager.start())
        start = time.perf_counter() - started
        echo = next(t for t in build_tools(manager) if t.name == "mcp__ev__echo")

        async def run() -> float:
            await echo.handler(message="warm")
            began = time.perf_counter()
            for _ in range(calls):
                await echo.handler(message="hi")
            return (time.perf_counter() - began) / calls

        return start, asyncio.run(run())
    finally:
        manager.close()


def construct_cost(servers: bool) -> tuple[float, bool]:
    arg = ", mcp_servers={'ev': {'command': 'x'}}" if servers else ""
    code = (
        "import sys, time; t = time.perf_counter(); import talaria; "
        f"talaria.Agent(model='m', api_key='k', home=sys.argv[1]{arg}); "
        "print(time.perf_counter() - t, 'mcp' in sys.modules)"
    )
    best, loaded = 1e9, False
    for _ in range(5):
        out = subprocess.run(
            [sys.executable, "-c", code, tempfile.mkdtemp()],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        best, loaded = min(best, float(out[0])), out[1] == "True"
    return best, loaded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    calls = parser.parse_args().calls
    command = everything()
    rounds = [through_talaria(command, calls) for _ in range(3)]
    start = min(r[0] for r in rounds)
    talaria_call = min(r[1] for r in rounds)
    sdk_call = min(asyncio.run(floor(command, calls)) for _ in range(3))
    print(f"server start (everything, stdio, best of 3): {start * 1000:.0f} ms")
    print(
        f"echo call (best of 3 x {calls}): talaria {talaria_call * 1000:.2f} ms, "
        f"SDK client alone {sdk_call * 1000:.2f} ms"
    )
    for servers in (False, True):
        seconds, loaded = construct_cost(servers)
        label = "with" if servers else "without"
        print(
            f"import + Agent(...) {label} mcp_servers: {seconds * 1000:.0f} ms, "
            f"mcp imported: {loaded}"
        )


if __name__ == "__main__":
    main()
