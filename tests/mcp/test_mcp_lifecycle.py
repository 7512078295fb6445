"""MCP servers over an agent's life: list changes, crashes, startup timeouts, approval,
children, and the cost of having none."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from helpers import scripted_agent, tool_results
from mcp_support import REPO, sdk_server, sent_tool_names
from talaria.events import Notice
from talaria.testing import ScriptedProvider, calls, text


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_a_tool_list_change_is_seen_at_the_next_turn(tmp_path: Path, protocol: str) -> None:
    script = [
        calls(("mcp__test__grow", {})),
        text("grown"),
        calls(("mcp__test__later", {})),
        text("done"),
    ]
    servers = {"test": sdk_server(protocol=protocol)}
    with (
        ScriptedProvider(script) as server,
        scripted_agent(server, tmp_path, mcp_servers=servers) as agent,
    ):
        agent.chat("grow")
        result = agent.run_conversation("use the new tool")
        first_turn = [sent_tool_names(r.body) for r in server.requests[:2]]
        second_turn = sent_tool_names(server.requests[2].body)
    assert first_turn[0] == first_turn[1], "the tools changed within a turn"
    assert "mcp__test__later" not in first_turn[1]
    assert second_turn[: len(first_turn[0])] == first_turn[0], "the cached prefix moved"
    assert "mcp__test__later" in second_turn
    assert tool_results(result)[-1] == "later works"


def test_a_killed_server_gives_an_error_result_then_works_after_restart(tmp_path: Path) -> None:
    script = [
        calls(("mcp__test__pid", {})),
        text("pid"),
        calls(("mcp__test__shout", {"text": "hi"})),
        text("crashed"),
        calls(("mcp__test__shout", {"text": "again"}), ("mcp__test__pid", {})),
        text("back"),
    ]
    with (
        ScriptedProvider(script) as server,
        scripted_agent(server, tmp_path, mcp_servers={"test": sdk_server()}) as agent,
    ):
        pid = int(tool_results(agent.run_conversation("pid"))[-1])
        os.kill(pid, signal.SIGKILL)
        _wait_gone(pid)
        crashed = tool_results(agent.run_conversation("shout"))[-1]
        shout, new_pid = tool_results(agent.run_conversation("shout again"))[-2:]
    assert crashed.startswith("Error:") and "restarted on the next call" in crashed
    assert shout == "AGAIN"
    assert int(new_pid) != pid


@pytest.mark.timeout(60)
def test_a_server_that_never_starts_times_out_with_a_notice(tmp_path: Path) -> None:
    hang = {
        "command": sys.executable,
        "args": ["-c", "import time; time.sleep(3600)"],
        "startup_timeout": 0.5,
    }
    notices: list[str] = []
    script = [calls(("mcp__test__shout", {"text": "works"})), text("done")]

    def record(event: Any) -> None:
        if isinstance(event, Notice):
            notices.append(event.message)

    with ScriptedProvider(script) as server:
        agent = scripted_agent(
            server,
            tmp_path,
            mcp_servers={"stuck": hang, "test": sdk_server()},
            event_callback=record,
        )
        with agent:
            result = agent.run_conversation("shout")
    assert [n for n in notices if "stuck" in n] == [
        "MCP server 'stuck' did not start within 0.5 s; its tools are not available"
    ]
    assert tool_results(result) == ["WORKS"]
    assert result["final_response"] == "done"


def test_approval_ask_with_no_approver_denies(tmp_path: Path) -> None:
    script = [calls(("mcp__test__shout", {"text": "secret"})), text("denied")]
    servers = {"test": sdk_server(approval="ask")}
    with (
        ScriptedProvider(script) as server,
        scripted_agent(server, tmp_path, mcp_servers=servers) as agent,
    ):
        result = agent.run_conversation("shout")
    (denial,) = tool_results(result)
    assert denial.startswith("Denied") and "approval" in denial
    assert "shouting" not in (tmp_path / "logs" / "mcp" / "test.log").read_text()


def test_approval_ask_asks_the_approver_and_remembers_a_session_grant(tmp_path: Path) -> None:
    asked: list[str] = []

    def approve(request: Any) -> str:
        asked.append(request.command)
        assert request.reason == """MCP server 'test' runs 'shout' with {"text": "one"}"""
        return "session"

    script = [
        calls(("mcp__test__shout", {"text": "one"})),
        calls(("mcp__test__shout", {"text": "two"})),
        text("done"),
    ]
    with (
        ScriptedProvider(script) as server,
        scripted_agent(
            server,
            tmp_path,
            mcp_servers={"test": sdk_server(approval="ask")},
            approval_callback=approve,
        ) as agent,
    ):
        result = agent.run_conversation("shout twice")
    assert tool_results(result) == ["ONE", "TWO"]
    assert asked == ["mcp__test__shout"], "a session grant covers the tool"


def test_a_delegate_child_uses_the_parents_servers(tmp_path: Path) -> None:
    script = [
        calls(("mcp__test__pid", {})),
        calls(("delegate_task", {"goal": "report the pid"})),
        calls(("mcp__test__pid", {})),
        text("child pid"),
        text("done"),
    ]
    with (
        ScriptedProvider(script) as server,
        scripted_agent(
            server, tmp_path, mcp_servers={"test": sdk_server()}, toolsets=["delegation"]
        ) as agent,
    ):
        result = agent.run_conversation("delegate")
        child_first, child_second = (r.body for r in server.requests[2:4])
    parent_pid = tool_results(result)[0]
    assert "mcp__test__pid" in sent_tool_names(child_first)
    child_results = [m["content"] for m in child_second["messages"] if m["role"] == "tool"]
    assert child_results == [parent_pid], "the child did not reach the parent's server"


def test_import_and_construction_without_servers_do_not_load_the_sdk(tmp_path: Path) -> None:
    code = (
        "import sys, talaria\n"
        f"agent = talaria.Agent(model='m', api_key='k', home={str(tmp_path)!r})\n"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)
