"""Approvals off never widen the boundary, through the real agent loop.

A hostile model reply asks to run a command outside the sandbox (`escalate: true`). With
approvals off nobody can allow that, so it is refused and never runs; in manual mode the
user is asked. The commands that deleted the home in the issue (`echo ~ | xargs rm -rf`,
`rm -rf $(echo ~)`, a function wrapping rm) are the floor whatever the mode or sandbox.
Every case runs against a throwaway HOME holding a canary file, outside /tmp (the sandbox
gives commands a private /tmp, which would hide the home rather than protect it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import outside_tmp, scripted_agent, tool_results
from talaria import Agent
from talaria.testing import ScriptedProvider, calls, text
from talaria.tools.sandbox_probe import sandbox_support

HOME_DELETERS = [
    "echo ~ | xargs rm -rf",
    "rm -rf $(echo ~)",
    'f() { rm -rf "$1"; }; f ~',
    'wipe() { rm -rf "$@"; }; wipe /var/empty/nothing ~',
    "sh -c 'rm -rf \"$1\"' _ ~",
    "alias x='rm -rf ~'",
]


@pytest.fixture
def dirs(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    base = outside_tmp()
    names = {"home": base / "home", "work": base / "work", "talaria": base / "talaria"}
    for path in names.values():
        path.mkdir()
    (names["home"] / "documents").mkdir()
    (names["home"] / "documents" / "thesis.txt").write_text("years of work")
    monkeypatch.setenv("HOME", str(names["home"]))
    yield names
    shutil.rmtree(base)


def _agent(
    server: ScriptedProvider,
    dirs: dict[str, Path],
    approvals: str,
    sandbox: str = "workspace-write",
    approver: Any = None,
) -> Agent:
    return scripted_agent(
        server,
        dirs["talaria"],
        cwd=dirs["work"],
        tools=[],
        toolsets=["terminal"],
        config={"approvals.mode": approvals, "sandbox.mode": sandbox},
        approval_callback=approver,
    )


def _run(server: ScriptedProvider, agent: Agent, arguments: dict[str, Any]) -> str:
    server.add(calls(("terminal", arguments)), text("done"))
    with agent:
        (result,) = tool_results(agent.run_conversation(user_message="tidy up"))
    return result


def _canary_intact(dirs: dict[str, Path]) -> bool:
    return (dirs["home"] / "documents" / "thesis.txt").read_text() == "years of work"


@pytest.fixture
def sandboxed() -> None:
    if not sandbox_support().available:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs bubblewrap: {sandbox_support().detail}")
        pytest.skip(sandbox_support().detail)


@pytest.mark.usefixtures("sandboxed")
def test_with_approvals_off_an_escalation_is_refused_and_never_runs(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    marker = dirs["home"] / "escalated.txt"
    agent = _agent(provider, dirs, "off")
    result = _run(
        provider,
        agent,
        {"command": f"touch {marker}", "escalate": True, "justification": "needs the home"},
    )
    assert result.startswith("Refused") and "without escalate=true" in result
    assert not marker.exists()


@pytest.mark.usefixtures("sandboxed")
@pytest.mark.parametrize("command", HOME_DELETERS)
@pytest.mark.parametrize("approvals", ["off", "manual"])
def test_escalated_home_deleters_never_run_outside_the_sandbox(
    provider: ScriptedProvider, dirs: dict[str, Path], command: str, approvals: str
) -> None:
    asked: list[Any] = []
    agent = _agent(provider, dirs, approvals, approver=lambda r: asked.append(r) or "once")
    result = _run(provider, agent, {"command": command, "escalate": True})
    assert result.startswith("BLOCKED"), result
    assert asked == [], "the floor is never offered for approval"
    assert _canary_intact(dirs)


@pytest.mark.parametrize("command", HOME_DELETERS)
@pytest.mark.parametrize("approvals", ["off", "manual"])
def test_home_deleters_are_the_floor_without_a_sandbox_too(
    provider: ScriptedProvider, dirs: dict[str, Path], command: str, approvals: str
) -> None:
    agent = _agent(provider, dirs, approvals, "full-access", approver=lambda r: "once")
    assert _run(provider, agent, {"command": command}).startswith("BLOCKED")
    assert _canary_intact(dirs)


@pytest.mark.usefixtures("sandboxed")
@pytest.mark.parametrize("answer", ["deny", "once"])
def test_in_manual_mode_an_escalation_is_asked_and_the_answer_decides(
    provider: ScriptedProvider, dirs: dict[str, Path], answer: str
) -> None:
    marker = dirs["home"] / "escalated.txt"
    asked: list[Any] = []
    agent = _agent(provider, dirs, "manual", approver=lambda r: asked.append(r) or answer)
    _run(
        provider,
        agent,
        {"command": f"touch {marker}", "escalate": True, "justification": "needs the home"},
    )
    (request,) = asked
    assert request.command == f"(outside the sandbox) touch {marker}"
    assert "outside the sandbox (needs the home)" in request.reason
    assert marker.exists() == (answer == "once")


def test_a_delete_whose_target_is_computed_at_run_time_is_refused_unattended_without_a_sandbox(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    (dirs["work"] / "dirs.txt").write_text(f"{dirs['home']}\n")
    agent = _agent(provider, dirs, "off", "full-access")
    result = _run(provider, agent, {"command": 'rm -rf "$(sort dirs.txt)"'})
    assert result.startswith("Refused") and "known only at run time" in result
    assert _canary_intact(dirs)


def test_a_computed_target_that_can_be_read_ahead_is_judged_by_its_value(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    (dirs["work"] / "dirs.txt").write_text(f"{dirs['home']}\n")
    agent = _agent(provider, dirs, "manual", "full-access", lambda r: "once")
    result = _run(provider, agent, {"command": 'rm -rf "$(cat dirs.txt)"'})
    assert result.startswith("BLOCKED") and _canary_intact(dirs)


def test_without_a_sandbox_a_computed_delete_asks_in_manual_mode(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    (dirs["work"] / "dirs.txt").write_text(f"{dirs['home']}\n")
    asked: list[Any] = []
    agent = _agent(provider, dirs, "manual", "full-access", lambda r: asked.append(r) or "deny")
    result = _run(provider, agent, {"command": 'rm -rf "$(sort dirs.txt)"'})
    assert result.startswith("Denied") and len(asked) == 1
    assert "known only at run time" in asked[0].reason
    assert _canary_intact(dirs)


@pytest.mark.usefixtures("sandboxed")
def test_inside_the_sandbox_unknown_commands_run_without_asking(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    asked: list[Any] = []
    (dirs["work"] / "build.py").write_text("open('built.txt', 'w').write('ok')\n")
    agent = _agent(provider, dirs, "manual", approver=lambda r: asked.append(r) or "deny")
    result = _run(provider, agent, {"command": "python3 build.py"})
    assert "exit code: 0" in result and asked == []
    assert (dirs["work"] / "built.txt").read_text() == "ok"


def test_without_a_sandbox_unknown_commands_ask_and_known_safe_ones_do_not(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    asked: list[Any] = []
    (dirs["work"] / "build.py").write_text("open('built.txt', 'w').write('ok')\n")
    agent = _agent(provider, dirs, "manual", "full-access", lambda r: asked.append(r) or "deny")
    provider.add(
        calls(("terminal", {"command": "python3 build.py"}), ("terminal", {"command": "ls -la"})),
        text("done"),
    )
    with agent:
        denied, listed = tool_results(agent.run_conversation(user_message="build"))
    assert [r.command for r in asked] == ["python3 build.py"]
    assert "no sandbox to contain it" in asked[0].reason
    assert denied.startswith("Denied") and not (dirs["work"] / "built.txt").exists()
    assert "build.py" in listed
