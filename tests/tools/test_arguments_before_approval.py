"""Arguments are checked before anyone is asked to approve: a user never approves a call that
then fails on its arguments. The approval wait is not part of a tool's duration."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from helpers import MODES, scripted_agent, tool_results
from talaria.events import ToolFinished
from talaria.testing import ScriptedProvider, call, text

pytestmark = pytest.mark.timeout(60)


def _terminal_agent(server: ScriptedProvider, home: Path, mode: str, asked: list[Any]) -> Any:
    def approve(request: Any) -> str:
        asked.append(request.command)
        time.sleep(1.5)  # a user reading the request
        return "once"

    return scripted_agent(
        server, home, mode, tools=None, toolsets=["terminal", "file"], approval_callback=approve
    )


@pytest.mark.parametrize("mode", MODES)
def test_bad_arguments_are_refused_before_the_user_is_asked(tmp_path: Path, mode: str) -> None:
    (tmp_path / "scratch").mkdir()
    script = [
        call("terminal", {"command": "rm -rf scratch", "timeout": -5}),
        call("terminal", {"command": "rm -rf scratch", "timeout": "soon"}),
        call("terminal", {"command": "rm -rf scratch", "timeout": None}),
        text("removed"),
    ]
    asked: list[str] = []
    with ScriptedProvider(script) as server:
        result = _terminal_agent(server, tmp_path, mode, asked).run_conversation("clean up")
    assert tool_results(result) == [
        "Error: invalid arguments for terminal: `timeout` must be at least 0, got -5. The "
        "call was not executed; fix the arguments and call again.",
        "Error: invalid arguments for terminal: `timeout` must be a number, got the string "
        '"soon". The call was not executed; fix the arguments and call again.',
        "(no output)\nexit code: 0",
    ]
    assert asked == ["rm -rf scratch"]  # once: for the call whose arguments were fine
    assert not (tmp_path / "scratch").exists()


def test_an_empty_command_and_a_patch_that_changes_nothing_are_argument_errors(
    tmp_path: Path,
) -> None:
    script = [
        call("terminal", {"command": "  "}),
        call("patch", {"path": "notes.txt", "old_string": "a", "new_string": "a"}),
        call("read_file", {"path": "notes.txt", "offset": -1}),
        text("nothing to do"),
    ]
    asked: list[str] = []
    with ScriptedProvider(script) as server:
        result = _terminal_agent(server, tmp_path, "chat_completions", asked).run_conversation(
            "edit"
        )
    first, second, third = tool_results(result)
    assert first.startswith("Error: invalid arguments for terminal: `command` is empty")
    assert second.startswith(
        "Error: invalid arguments for patch: old_string and new_string are the same"
    )
    assert third.startswith("Error: invalid arguments for read_file: `offset` must be at least 0")
    assert asked == []


def test_the_approval_wait_is_not_part_of_the_tools_duration(tmp_path: Path) -> None:
    (tmp_path / "scratch").mkdir()
    finished: list[ToolFinished] = []
    asked: list[str] = []
    with ScriptedProvider([call("terminal", {"command": "rm -rf scratch"}), text("ok")]) as server:
        agent = _terminal_agent(server, tmp_path, "chat_completions", asked)
        agent.subscribe(lambda e: finished.append(e) if isinstance(e, ToolFinished) else None)
        agent.run_conversation("clean up")
    assert asked == ["rm -rf scratch"] and not (tmp_path / "scratch").exists()
    (event,) = finished
    assert event.duration_s < 1.5  # the user took 1.5 s to approve; rm itself takes far less


def test_zero_for_an_offset_or_a_timeout_means_from_the_start_and_the_default(
    tmp_path: Path,
) -> None:
    """Small local models send 0 for "not given"; refused, they sent the same call again."""
    (tmp_path / "notes.txt").write_text("first\nsecond\n")
    script = [
        call("read_file", {"path": "notes.txt", "offset": 0}),
        call("terminal", {"command": "echo ran", "timeout": 0}),
        text("done"),
    ]
    with ScriptedProvider(script) as server:
        agent = scripted_agent(server, tmp_path, tools=None, toolsets=["terminal", "file"])
        result = agent.run_conversation("read and run")
    read, ran = tool_results(result)
    assert read.startswith("1|first\n2|second")
    assert "ran" in ran and "exit code: 0" in ran
