"""The policy sees what will run: write-then-run and decoded payloads, through the real loop.

Every case runs in `full-access`, so that only the policy stands between the command and a
throwaway HOME under tmp_path (the sandbox would contain it anyway: tests/test_sandbox.py).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from helpers import tool_results
from talaria import Agent
from talaria.testing import ScriptedProvider, calls, text

MODES = ["manual", "off"]


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / "documents").mkdir(parents=True)
    (home / "documents" / "thesis.txt").write_text("years of work")
    monkeypatch.setenv("HOME", str(home))
    return home


def _agent(server: ScriptedProvider, tmp_path: Path, mode: str, approver: Any) -> Agent:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return Agent(
        model="scripted-model",
        base_url=server.openai_base_url,
        api_key="test-key",
        home=tmp_path / "talaria",
        cwd=work,
        toolsets=["terminal", "file"],
        config={"context.engine": "none", "approvals.mode": mode, "sandbox.mode": "full-access"},
        approval_callback=approver,
    )


def _turn(server: ScriptedProvider, agent: Agent, *steps: tuple[str, dict[str, Any]]) -> list[str]:
    for step in steps:
        server.add(calls(step))
    server.add(text("done"))
    with agent:
        return tool_results(agent.run_conversation(user_message="tidy up"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("runner", ["sh cleanup.sh", "bash cleanup.sh", ". ./cleanup.sh"])
def test_a_script_written_then_run_is_judged_by_its_content(
    provider: ScriptedProvider, tmp_path: Path, fake_home: Path, mode: str, runner: str
) -> None:
    asked: list[Any] = []
    agent = _agent(provider, tmp_path, mode, lambda request: asked.append(request) or "once")
    written, ran = _turn(
        provider,
        agent,
        ("write_file", {"path": "cleanup.sh", "content": "echo tidying\nrm -rf ~\n"}),
        ("terminal", {"command": runner}),
    )
    assert "cleanup.sh" in written
    assert ran.startswith("BLOCKED") and "home directory" in ran
    assert (fake_home / "documents" / "thesis.txt").read_text() == "years of work"
    assert asked == [], "the floor is never offered for approval"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "command",
    [
        "echo {b64} | base64 -d | sh",
        'sh -c "$(echo {b64} | base64 --decode)"',
        "echo {b64} | base64 -d > job.sh; bash job.sh",
        "perl -e 'system(\"rm -rf \" . $ENV{{HOME}})'",
        "python3 -c 'import shutil, pathlib; shutil.rmtree(pathlib.Path.home())'",
        "taskset -c 0 rm -rf ~",
    ],
)
def test_decoded_and_wrapped_payloads_are_blocked_in_every_mode(
    provider: ScriptedProvider, tmp_path: Path, fake_home: Path, mode: str, command: str
) -> None:
    payload = base64.b64encode(b"rm -rf ~").decode()
    agent = _agent(provider, tmp_path, mode, lambda request: "once")
    (result,) = _turn(provider, agent, ("terminal", {"command": command.format(b64=payload)}))
    assert result.startswith("BLOCKED")
    assert (fake_home / "documents" / "thesis.txt").read_text() == "years of work"


def test_a_script_that_is_merely_dangerous_asks_and_a_denial_keeps_the_files(
    provider: ScriptedProvider, tmp_path: Path, fake_home: Path
) -> None:
    asked: list[Any] = []
    agent = _agent(provider, tmp_path, "manual", lambda request: asked.append(request) or "deny")
    build = tmp_path / "work" / "build"
    build.mkdir(parents=True)
    _turn(
        provider,
        agent,
        ("write_file", {"path": "tidy.sh", "content": "rm -rf build\n"}),
        ("terminal", {"command": "sh tidy.sh"}),
    )
    assert [request.reason for request in asked] == ["deletes files recursively"]
    assert build.exists()


def test_inline_interpreter_code_asks_in_manual_mode_and_runs_in_off(
    provider: ScriptedProvider, tmp_path: Path, fake_home: Path
) -> None:
    asked: list[Any] = []
    marker = tmp_path / "work" / "ran.txt"
    # a path relative to the working directory: the code names no directory of the test run
    # (pytest-xdist's contain "popen", which the policy reads as a call that runs commands)
    step = ("terminal", {"command": "python3 -c \"open('ran.txt', 'w').write('x')\""})
    manual = _agent(provider, tmp_path, "manual", lambda request: asked.append(request) or "deny")
    _turn(provider, manual, step)
    assert [request.reason for request in asked] == [
        "runs inline python code that cannot be checked"
    ]
    assert not marker.exists()
    _turn(provider, _agent(provider, tmp_path, "off", None), step)
    assert marker.exists()
