"""A tool's arguments reach its handler whatever they are called: an argument named like a
parameter of the machinery that runs handlers (`timeout`, `fn`, `call`) is the tool's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import MODES, scripted_agent, tool_results
from talaria import tool
from talaria.durable.client import connect, start_turn
from talaria.testing import ScriptedProvider, call, text
from temporal_cluster import WorkerProcess, worker_home


@tool
def echo_names(fn: str, call: str, timeout: int, kwargs: str, args: str) -> str:
    """Echo arguments whose names the runner itself uses.

    Args:
        fn: any text
        call: any text
        timeout: any number
        kwargs: any text
        args: any text
    """
    return f"{fn} {call} {timeout} {kwargs} {args}"


@pytest.mark.parametrize("mode", MODES)
def test_terminal_runs_with_a_timeout_in_every_api_mode(tmp_path: Path, mode: str) -> None:
    script = [call("terminal", {"command": "echo hello", "timeout": 30}), text("done")]
    with ScriptedProvider(script) as server:
        agent = scripted_agent(server, tmp_path, mode, tools=None, toolsets=["terminal"])
        result = agent.run_conversation("say hello")
    assert tool_results(result) == ["hello\nexit code: 0"]
    assert result["final_response"] == "done"


def test_a_plugin_tool_gets_arguments_named_like_the_runners_parameters(
    tmp_path: Path,
) -> None:
    arguments = {"fn": "a", "call": "b", "timeout": 3, "kwargs": "c", "args": "d"}
    with ScriptedProvider([call("echo_names", arguments), text("done")]) as server:
        result = scripted_agent(server, tmp_path, tools=[echo_names]).run_conversation("go")
    assert tool_results(result) == ["a b 3 c d"]


@pytest.mark.timeout(300)
async def test_terminal_runs_with_a_timeout_on_a_durable_worker(
    temporal_target: str, tmp_path: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    home = worker_home(tmp_path / "home")
    script = [call("terminal", {"command": "echo hello", "timeout": 30}), text("done")]
    with ScriptedProvider(script) as server:
        workers.append(WorkerProcess(temporal_target, queue, server, home, toolsets="terminal"))
        client = await connect(temporal_target)
        result = await (await start_turn(client, queue, "say hello")).result()
    assert tool_results(result) == ["hello\nexit code: 0"]
    assert result["final_response"] == "done"
