"""Hostile terminal text: the renderer and the one-shot answer on a terminal drop control
sequences, keeping only talaria's own colours."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from talaria import events as ev
from talaria.cli.render import Renderer
from talaria.testing import ScriptedProvider, text

HOSTILE = (
    "copy \x1b]52;c;cm0gLXJmIH4=\x07this\x1b[2J\x1b[H, retitle \x1b]0;pwned\x1b\\now, "
    "move \x1b[10;10H\x1b[K, 8-bit \x9b2J\x9d0;t\x9c and \x1bc reset\n\n"
)


def test_the_renderer_drops_control_sequences_but_keeps_its_colours(tmp_path: Path) -> None:
    out = io.StringIO()
    renderer = Renderer(out, color=True, cwd=tmp_path)
    renderer.begin_turn()
    for event in (
        ev.TextDelta(HOSTILE),
        ev.ReasoningDelta("think \x1b]2;title\x07 hard\n"),
        ev.ToolStarted("c1", "terminal", {"command": "echo \x1b]52;c;eA==\x07"}),
        ev.ToolFinished("c1", "terminal", "\x1b[2Jerror \x1b]0;t\x07", True, 0.1),
        ev.ToolStarted("c2", "terminal", {"command": "cat notes"}),
        ev.ToolFinished("c2", "terminal", "line \x1b]52;c;eA==\x07 \x1b[31mred\x1b[0m", False, 0.1),
        ev.Notice("warning", "provider said \x1b[2J\x1b]0;x\x07 hello"),
        ev.TurnFinished("text_response", HOSTILE, 1),
    ):
        renderer(event)
    renderer.error("bad \x1b]52;c;eA==\x07 thing")
    shown = out.getvalue()
    forbidden = ("\x1b]", "\x1b[2J", "\x1b[H", "\x1b[K", "\x1b[10;10H", "\x9b", "\x9d", "\x1bc")
    for sequence in (*forbidden, "\x07"):
        assert sequence not in shown, repr(sequence)
    assert "\x1b[" in shown, "the renderer's own colours stay"
    assert "copy" in shown and "this" in shown and "hello" in shown


@pytest.mark.pty
def test_the_one_shot_answer_on_a_terminal_loses_its_control_sequences(tmp_path: Path) -> None:
    """`talaria -p` streams the answer to a terminal: what reaches it has no OSC / CSI."""
    import pty

    from cli_process import MODEL_ARGS

    primary, secondary = pty.openpty()
    with ScriptedProvider([text(HOSTILE)]) as server:
        done = subprocess.run(
            [sys.executable, "-m", "talaria.cli.main", "-p", "say it", *MODEL_ARGS,
             "--base-url", server.openai_base_url],
            env={**os.environ, "TALARIA_HOME": str(tmp_path)}, stdin=subprocess.DEVNULL,
            stdout=secondary, stderr=subprocess.PIPE, timeout=60,
        )  # fmt: skip
    os.close(secondary)
    shown = b""
    with contextlib.suppress(OSError):
        while chunk := os.read(primary, 65536):
            shown += chunk
    os.close(primary)
    assert done.returncode == 0, done.stderr
    answer = shown.decode("utf-8", "replace")
    assert "copy" in answer and "reset" in answer
    for sequence in ("\x1b", "\x07", "\x9b", "\x9d"):
        assert sequence not in answer, repr(answer)
