"""/diff and /rewind in `talaria chat`, in a pseudo-terminal: the agent edits a file with
`sed -i`, /diff shows it, /rewind lists the turn with the file it changed, and
`/rewind 1 files` puts the file back while the conversation stays."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli_pty import answer_with, chat, provider  # noqa: F401

from talaria.testing.script import Reply, ScriptedCall


def test_diff_then_rewind_the_files_of_a_turn(provider, chat, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    notes = tmp_path / "my notes.txt"
    notes.write_text("original line\n")
    edit = ScriptedCall("terminal", {"command": "sed -i 's/original/edited/' 'my notes.txt'"})
    answer_with(provider, {"edit": Reply(tool_calls=[edit])})
    terminal = chat("--yolo", toolsets="terminal")
    terminal.send("/rewind")
    terminal.expect("no turns to rewind to yet")
    terminal.send("edit the notes")
    terminal.expect("done:")
    assert notes.read_text() == "edited line\n"
    terminal.send("/diff")
    terminal.expect("-original line")
    terminal.expect("+edited line")
    terminal.send("/rewind")
    terminal.expect("1. edit the notes")
    terminal.expect("1 file(s) changed: my notes.txt")
    terminal.expect("steps: 1.1 terminal")
    terminal.send("/rewind 1.5")
    terminal.expect("checkpoint 1 has no step 5 (it has 1)")
    terminal.send("/rewind 1 sideways")
    terminal.expect("usage: /rewind <turn>[.<step>] [files|conversation|both]")
    terminal.send("/rewind 1 files")
    terminal.expect("1 file(s) restored")
    terminal.expect("my notes.txt")
    assert notes.read_text() == "original line\n"
    terminal.send("/diff")
    terminal.expect("the agent changed no files")
    terminal.assert_clean()


@pytest.fixture(autouse=True)
def _no_real_home(tmp_path: Path) -> None:
    (tmp_path / "user-home").mkdir()
