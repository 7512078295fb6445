"""SIGTERM to the interactive `talaria chat` while a tool runs `sleep 300`: the turn stops, no
process survives, the session is kept, and the chat exits 143 with one line; a damaged
database is one line and exit 2 before the first prompt."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from cli_process import integrity, tagged_processes, wait_for
from pty_terminal import Terminal
from talaria.testing import Reply, ScriptedCall, ScriptedProvider, text


@pytest.mark.pty
def test_sigterm_in_the_interactive_chat_stops_the_tool_and_exits_143(tmp_path: Path) -> None:
    sleeper = Reply(
        tool_calls=[ScriptedCall("terminal", {"command": "setsid sleep 3041 & sleep 300"})]
    )
    with ScriptedProvider([sleeper, text("never")]) as server:
        terminal = Terminal(
            ["chat", "-m", "scripted-model", "--base-url", server.openai_base_url,
             "--api-key", "k", "--toolsets", "terminal", "--yolo"],
            tmp_path / "home",
            tmp_path,
        )  # fmt: skip
        try:
            terminal.expect("/help for commands")
            terminal.send("run the sleeper")
            assert wait_for(lambda: any("sleep 300" in c for _, c in tagged_processes()))
            terminal.child.kill(signal.SIGTERM)
            code = terminal.wait_exit(timeout=30)
        finally:
            terminal.child.close(force=True)
    assert code == 143
    assert "talaria: interrupted by SIGTERM" in terminal.text
    assert "Traceback" not in terminal.text
    assert wait_for(lambda: not tagged_processes(), 5), tagged_processes()
    assert integrity(tmp_path / "home" / "state.db") == "ok"


@pytest.mark.pty
def test_the_interactive_chat_on_a_damaged_database_is_one_line_and_exit_2(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = home / "state.db"
    db.write_bytes(b"no database here " * 300)
    before = db.read_bytes()
    terminal = Terminal(
        ["chat", "-m", "scripted-model", "--base-url", "http://127.0.0.1:9/v1", "--api-key", "k"],
        home,
        tmp_path,
    )
    try:
        code = terminal.wait_exit(timeout=30)
    finally:
        terminal.child.close(force=True)
    assert code == 2
    assert f"talaria: session database {db} is damaged" in terminal.text
    assert "/help for commands" not in terminal.text, "it says so before the first prompt"
    assert "Traceback" not in terminal.text
    assert db.read_bytes() == before
