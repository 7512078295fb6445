"""Approvals, clarify and plugin guards as the model experiences them, through the real loop."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import scripted_agent, tool_results, when
from talaria import Agent
from talaria.testing import ScriptedProvider, calls, text


def make_agent(server: ScriptedProvider, home: Path, **kwargs: Any) -> Agent:
    kwargs.setdefault("toolsets", ["terminal"])
    kwargs.setdefault("tools", [])
    return scripted_agent(server, home, **kwargs)


def rm_step(target: Path):
    return calls(("terminal", {"command": f"rm -rf {target}"}))


@pytest.mark.parametrize("decision", ["once", "session", "always", "deny"])
def test_approval_decisions(provider: ScriptedProvider, tmp_path: Path, decision: str) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    asked: list[Any] = []

    def approve(request: Any) -> str:
        asked.append(request)
        return decision

    provider.add(rm_step(first), text("one"), rm_step(first), text("two"))
    provider.add(rm_step(second), text("three"))
    survived = []
    with make_agent(provider, tmp_path, approval_callback=approve) as agent:
        for message, target in (("delete", first), ("again", first), ("other", second)):
            target.mkdir(exist_ok=True)
            agent.run_conversation(user_message=message)
            survived.append(target.exists())

    assert "rm" in asked[0].command and asked[0].reason
    assert asked[0].pattern == asked[0].command == f"rm -rf {first}"
    assert survived == [decision == "deny"] * 3
    if decision in ("deny", "once"):
        assert len(asked) == 3, "a one-off answer must be asked again"
    else:
        assert len(asked) == 2, f"{decision} covers the same command, never another path"
        assert asked[1].command == f"rm -rf {second}"
    config_file = tmp_path / "config.yaml"
    persisted = yaml.safe_load(config_file.read_text()) if config_file.exists() else {}
    expected = [f"rm -rf {first}", f"rm -rf {second}"] if decision == "always" else None
    assert (persisted or {}).get("command_allowlist") == expected


def test_always_is_remembered_by_a_new_agent_for_that_command_only(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    target, other = tmp_path / "victim", tmp_path / "other"
    provider.add(rm_step(target), text("ok"), rm_step(target), text("done"))
    provider.add(rm_step(other), text("refused"))
    with make_agent(provider, tmp_path, approval_callback=lambda request: "always") as agent:
        agent.run_conversation(user_message="first")
    target.mkdir()
    other.mkdir()
    with make_agent(provider, tmp_path) as headless:
        result = headless.run_conversation(user_message="second")
        assert not target.exists(), tool_results(result)
        denied = headless.run_conversation(user_message="third")
    assert other.exists()
    assert tool_results(denied)[-1].startswith("Denied")


def test_hard_floor_is_blocked_even_in_yolo_mode(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(calls(("terminal", {"command": "rm -rf /"})), text("refused"))
    with make_agent(provider, tmp_path, config={"approvals.mode": "off"}) as agent:
        result = agent.run_conversation(user_message="wipe")
    (blocked,) = tool_results(result)
    assert blocked.startswith("BLOCKED")


def test_clarify_reaches_the_callback_and_the_answer_reaches_the_model(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    questions: list[tuple[str, Any]] = []

    def clarify(question: str, choices: list[str] | None) -> str:
        questions.append((question, choices))
        return "blue"

    provider.add(
        calls(("clarify", {"question": "Which colour?", "choices": ["red", "blue"]})),
        text("blue it is"),
    )
    with make_agent(provider, tmp_path, toolsets=["clarify"], clarify_callback=clarify) as agent:
        result = agent.run_conversation(user_message="paint it")
    assert questions == [("Which colour?", ["red", "blue"])]
    assert "blue" in tool_results(result)[0]
    assert "blue" in str(provider.requests[-1].body["messages"][-1])


def test_clarify_is_not_offered_without_a_callback(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(text("fine"))
    with make_agent(provider, tmp_path, toolsets=None) as agent:
        agent.run_conversation(user_message="hello")
    offered = {t["function"]["name"] for t in provider.requests[0].body.get("tools", [])}
    assert "clarify" not in offered
    assert {"terminal", "read_file", "todo", "memory", "delegate_task"} <= offered


def test_plugin_guard_can_block_and_rewrite(provider: ScriptedProvider, tmp_path: Path) -> None:
    seen: list[str] = []

    class Guard:
        @staticmethod
        def register(bus: Any) -> None:
            def pre(tool_name: str, arguments: dict[str, Any], **_: Any) -> Any:
                if "forbidden" in arguments.get("command", ""):
                    return {"block": "policy says no"}
                if arguments.get("command") == "echo original":
                    return {"arguments": {"command": "echo rewritten"}}
                return None

            bus.register("pre_tool_call", pre)
            bus.register("post_tool_call", lambda **kw: seen.append(kw["result"]))

    provider.add(
        calls(
            ("terminal", {"command": "echo forbidden"}), ("terminal", {"command": "echo original"})
        ),
        text("done"),
    )
    with make_agent(provider, tmp_path, plugins=[Guard]) as agent:
        result = agent.run_conversation(user_message="go")
    blocked, rewritten = tool_results(result)
    assert "policy says no" in blocked
    assert "rewritten" in rewritten
    assert len(seen) == 2


def test_failing_guard_blocks_the_call(provider: ScriptedProvider, tmp_path: Path) -> None:
    marker = tmp_path / "created"

    def register(bus: Any) -> None:
        def broken(**_: Any) -> None:
            raise RuntimeError("guard crashed")

        bus.register("pre_tool_call", broken)

    provider.add(calls(("terminal", {"command": f"touch {marker}"})), text("done"))
    with make_agent(provider, tmp_path, plugins=[register]) as agent:
        result = agent.run_conversation(user_message="go")
    assert "guard crashed" in tool_results(result)[0]
    assert not marker.exists()


@pytest.mark.timeout(60)
def test_interrupt_kills_a_running_command_and_its_children(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    command = f"sleep 3600 & echo $! >> {pid_file}; sleep 3600 & echo $! >> {pid_file}; wait"
    provider.add(calls(("terminal", {"command": command})), text("next turn"))
    # the pids must be the host's, so no pid namespace (tests/test_sandbox.py covers it)
    unconfined = {"approvals.mode": "off", "sandbox.mode": "full-access"}
    with make_agent(provider, tmp_path, config=unconfined) as agent:
        both_started = lambda: pid_file.exists() and len(pid_file.read_text().split()) == 2  # noqa: E731
        when(both_started, agent.interrupt)
        result = agent.run_conversation(user_message="sleep")
        assert result["interrupted"]
        pids = [int(p) for p in pid_file.read_text().split()]
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
            time.sleep(0.1)
        assert not any(_alive(pid) for pid in pids)
        assert agent.run_conversation(user_message="again")["final_response"] == "next turn"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False
