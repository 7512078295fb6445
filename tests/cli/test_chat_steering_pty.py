"""`talaria chat` in a pseudo-terminal: typing while the agent works. Enter queues (the chat
says so, `/queue` lists the waiting messages and `/queue clear` takes them back), `/steer`
reaches the running turn's next model call after the tool's result, and the chat shows when
it was delivered."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from pty_terminal import chat, provider  # noqa: F401
from talaria.testing import ScriptedProvider, call, text

pytestmark = [pytest.mark.timeout(120), pytest.mark.pty]

STEER = "Also mention the docs folder."
WAIT_FOR_GO = "touch started; while [ ! -e go ]; do sleep 0.05; done; echo released"
"""A command that says it runs (`started`) and runs until the test creates `go`."""


def wait_for_file(terminal: Any, path: Path) -> None:
    """Wait for `path`, reading the screen meanwhile (the chat's cursor position requests
    are answered while reading: unanswered, prompt_toolkit prints a warning)."""
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        terminal._read(0.05)


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chat's HOME is the test's (its TALARIA_HOME already is)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def user_texts(server: ScriptedProvider, index: int) -> list[str]:
    messages = server.requests[index].body["messages"]
    return [m["content"] for m in messages if m["role"] == "user"]


def test_typing_during_a_tool_queues_lists_clears_and_steers(
    provider: ScriptedProvider,  # noqa: F811
    chat: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    provider.add(call("terminal", {"command": WAIT_FOR_GO}), text("First done."), text("Four."))
    terminal = chat("--yolo", toolsets="terminal")
    terminal.send("one")
    wait_for_file(terminal, tmp_path / "started")

    terminal.send("two")
    terminal.expect("queued: two")
    terminal.send("three")
    terminal.expect("queued: three")
    terminal.send("/queue")
    terminal.expect("queued 1: two")
    terminal.expect("queued 2: three")
    terminal.send("/queue clear")
    terminal.expect("took back 2 queued message(s)")
    terminal.send("four")
    terminal.expect("queued: four")
    terminal.send(f"/steer {STEER}")
    terminal.expect(f"steering: {STEER}")
    (tmp_path / "go").touch()

    terminal.expect(f"steer delivered to the model: {STEER}")
    terminal.expect("First done.")
    terminal.expect("› four")
    terminal.expect("Four.")
    terminal.send("/queue")
    terminal.expect("nothing is queued")
    terminal.send("/quit")
    assert terminal.wait_exit() == 0
    terminal.assert_clean()

    assert len(provider.requests) == 3
    after_tool = json.dumps(provider.requests[1].body)
    assert after_tool.index("released") < after_tool.index(STEER), "after the tool's result"
    assert user_texts(provider, 1) == ["one", STEER]
    assert user_texts(provider, 2) == ["one", STEER, "four"], "taken-back messages never ran"
    assert provider.invalid_requests == []


def test_steer_with_no_turn_running_is_sent_as_a_message(
    provider: ScriptedProvider,  # noqa: F811
    chat: Any,  # noqa: F811
) -> None:
    provider.add(text("Heard you."))
    terminal = chat()
    terminal.send("/steer are you there")
    terminal.expect("no turn is running: sent as a message")
    terminal.expect("Heard you.")
    terminal.send("/quit")
    assert terminal.wait_exit() == 0
    assert user_texts(provider, 0) == ["are you there"]


def test_the_waiting_messages_are_shown_edited_and_dropped(
    provider: ScriptedProvider,  # noqa: F811
    chat: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    provider.add(call("terminal", {"command": WAIT_FOR_GO}), text("First done."))
    provider.add(text("Answered TWO."), text("Answered four."))
    terminal = chat("--yolo", toolsets="terminal")
    terminal.send("one")
    wait_for_file(terminal, tmp_path / "started")
    for line in ("two", "three", "four"):
        terminal.send(line)
        terminal.expect(f"queued: {line}")
    terminal.expect("↳ four")  # the waiting messages stay on screen under the spinner
    terminal.send("/queue drop 2")
    terminal.expect("dropped queued 2")
    terminal.send("/queue edit 1 TWO")
    terminal.expect("edited queued 1")
    terminal.child.send("\x1b\x1b[A")  # Alt+Up: the last one back on the input line
    terminal.send(" please")
    terminal.expect("queued: four please")
    terminal.send("/queue")
    terminal.expect("queued 1: TWO")
    terminal.expect("queued 2: four please")
    (tmp_path / "go").touch()

    terminal.expect("Answered four.")
    terminal.send("/quit")
    assert terminal.wait_exit() == 0
    terminal.assert_clean()
    assert [user_texts(provider, i)[-1] for i in (2, 3)] == ["TWO", "four please"]
    assert len(provider.requests) == 4
    assert provider.invalid_requests == []


def test_a_queued_message_survives_a_killed_chat_and_runs_once(
    provider: ScriptedProvider,  # noqa: F811
    chat: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    provider.add(call("terminal", {"command": WAIT_FOR_GO}))
    provider.add(text("Ran the survivor."), text("Fresh."))
    terminal = chat("--yolo", toolsets="terminal")
    terminal.send("one")
    wait_for_file(terminal, tmp_path / "started")
    terminal.send("two")
    terminal.expect("queued: two")
    terminal.child.kill(signal.SIGKILL)
    terminal.child.wait()
    (tmp_path / "go").touch()  # the orphaned command ends

    resumed = chat("--continue", "--yolo", toolsets="terminal")
    resumed.expect("1 message(s) were queued when this session last ran")
    resumed.expect("queued 1: two")
    resumed.send("/queue run")
    resumed.expect("Ran the survivor.")
    resumed.send("/quit")
    assert resumed.wait_exit() == 0

    again = chat("--continue", toolsets="terminal")
    again.send("/queue")
    again.expect("nothing is queued")
    again.send("three")
    again.expect("Fresh.")
    again.send("/quit")
    assert again.wait_exit() == 0
    again.assert_clean()
    assert user_texts(provider, 1)[-1].endswith("two")  # after the killed turn's own message
    assert "\n".join(user_texts(provider, 2)).count("two") == 1, "it ran once"
    assert user_texts(provider, 2)[-1] == "three"
    assert provider.invalid_requests == []
