"""`chat -q --temporal --output-format stream-json` streams the durable turn's events as they
happen, one JSON line each in the local format, then the result line (it used to print the
result alone); the streamed text and the final answer are the same text, steps kept apart."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_editor import agent_env
from talaria.testing import ScriptedProvider, call, text
from temporal_cluster import WorkerProcess, worker_home

pytestmark = pytest.mark.timeout(240)


async def test_a_durable_turn_streams_its_events_as_json_lines(
    provider: ScriptedProvider,
    tmp_path: Path,
    temporal_target: str,
    queue: str,
    workers: list[Any],
) -> None:
    home = worker_home(tmp_path / "home")
    provider.add(call("terminal", {"command": "echo 5"}, text="Adding."), text("It is 5."))
    workers.append(
        await asyncio.to_thread(
            WorkerProcess, temporal_target, queue, provider, home, toolsets="terminal"
        )
    )
    command = [sys.executable, "-m", "talaria.cli.main", "chat", "-q", "add", "--temporal",
               temporal_target, "--task-queue", queue, "--output-format", "stream-json",
               "--home", str(home)]  # fmt: skip
    done = await asyncio.to_thread(
        subprocess.run, command, capture_output=True, text=True, env=agent_env(home), timeout=180
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [line["type"] for line in lines]
    assert kinds[-1] == "result" and kinds.count("result") == 1
    assert {"turn_started", "tool_started", "tool_finished", "text_delta"} <= set(kinds)
    streamed = "".join(line["text"] for line in lines if line["type"] == "text_delta")
    assert streamed == lines[-1]["final_response"] == "Adding.\n\nIt is 5."
