"""SIGTERM and SIGINT while `talaria chat -q` runs `sleep 300`: the turn stops, every process
the command started (detached ones included) is gone, what was complete is stored, and the
exit code is 143 / 130 with one line and no traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_process import MODEL_ARGS, SANDBOX_MODES, integrity, one_line, tagged_processes, wait_for
from helpers import scripted_agent
from talaria.testing import ScriptedProvider, call, text


def start_chat(
    home: Path, server: ScriptedProvider, command: str, sandbox: str
) -> subprocess.Popen[str]:
    server.add(call("terminal", {"command": command}), text("after"))
    env = {**os.environ, "TALARIA_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "talaria.cli.main", "chat", "-q", "run it", *MODEL_ARGS,
         "--base-url", server.openai_base_url, "--yolo", "--toolsets", "terminal",
         "--sandbox", sandbox],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=home,
    )  # fmt: skip


def confined(sandbox: str) -> bool:
    """Whether the running command is inside bubblewrap, as `sandbox` says it must be."""
    inside = any(cmdline.split(" ", 1)[0].endswith("bwrap") for _, cmdline in tagged_processes())
    return inside == (sandbox != "full-access")


def _running(marker: str) -> bool:
    return any(marker in cmdline for _, cmdline in tagged_processes())


DETACHING = "setsid sleep 3011 >/dev/null 2>&1 & sleep 3012 >/dev/null 2>&1 & sleep 300"


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
@pytest.mark.parametrize(("number", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_a_tool_stops_everything_and_keeps_the_session(
    tmp_path: Path, number: signal.Signals, code: int, sandbox: str
) -> None:
    with ScriptedProvider() as server:
        chat = start_chat(tmp_path, server, DETACHING, sandbox)
        try:
            assert wait_for(lambda: _running("sleep 300") and _running("sleep 3011"))
            assert confined(sandbox), tagged_processes()
            chat.send_signal(number)
            out, err = chat.communicate(timeout=15)
        finally:
            chat.kill()
        assert chat.returncode == code
        line = one_line(err)
        assert line.startswith(f"talaria: interrupted by {number.name}; what was complete is saved")
        assert out == ""
        assert wait_for(lambda: not tagged_processes(), 5), tagged_processes()
        assert integrity(tmp_path / "state.db") == "ok"
        with scripted_agent(server, tmp_path, session_id="latest") as agent:
            assert agent.chat("go on") == "after"
            history = agent.messages
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "user", "assistant"]
    assert "interrupted" in history[2]["content"].lower()


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_a_second_signal_stops_at_once_even_when_the_tool_ignores_the_first(
    tmp_path: Path, sandbox: str
) -> None:
    with ScriptedProvider() as server:
        chat = start_chat(tmp_path, server, "trap '' TERM INT; sleep 3013", sandbox)
        try:
            assert wait_for(lambda: _running("sleep 3013"))
            chat.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            chat.send_signal(signal.SIGTERM)
            _, err = chat.communicate(timeout=15)  # at once: the tool ignores signals for 3013 s
        finally:
            chat.kill()
    # the second signal may land while talaria is already winding down (the sandbox's
    # namespace takes the tool down at once): it still exits 143
    assert chat.returncode == 143, err
    line = one_line(err)
    assert "stopped by a second SIGTERM" in line or "interrupted by SIGTERM" in line
    assert wait_for(lambda: not tagged_processes(), 5), tagged_processes()
    assert integrity(tmp_path / "state.db") == "ok"
