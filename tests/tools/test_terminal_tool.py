"""The terminal and process tools, run for real: bash, process groups, signals, log files."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from talaria.tools.base import ToolContext, ToolError
from talaria.tools.builtin import builtin_tools
from talaria.tools.builtin.processes import process
from talaria.tools.builtin.terminal import terminal


def _ctx(cwd: Path, session_id: str = "session-1") -> ToolContext:
    return ToolContext(
        task_id="task-1",
        session_id=session_id,
        cwd=cwd,
        home=cwd / ".talaria",
        interrupt=threading.Event(),
        emit=lambda event: None,
    )


def _live_members(pgid: int) -> list[int]:
    """Processes of the group that are running (zombies waiting for init do not count)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(stat[2]) == pgid and stat[0] != b"Z":
            members.append(int(entry))
    return members


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_bytes().rsplit(b")", 1)[1].split()[0] != b"Z"


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_reports_interleaved_output_and_exit_code(tmp_path: Path) -> None:
    result = terminal("echo out; echo err >&2; echo more; exit 3", _ctx(tmp_path))
    assert result.splitlines() == ["out", "err", "more", "exit code: 3"]


def test_runs_in_the_task_directory_without_pagers_or_stdin(tmp_path: Path) -> None:
    result = terminal('pwd; echo "$PAGER $GIT_PAGER $GIT_EDITOR"; cat; echo end', _ctx(tmp_path))
    assert result.splitlines() == [str(tmp_path), "cat cat true", "end", "exit code: 0"]


def test_says_when_there_was_no_output(tmp_path: Path) -> None:
    assert terminal("true", _ctx(tmp_path)) == "(no output)\nexit code: 0"


def test_long_output_keeps_head_and_tail(tmp_path: Path) -> None:
    command = "seq 1 100000"
    result = terminal(command, _ctx(tmp_path))
    assert result.startswith("1\n2\n3\n")
    assert result.endswith("99999\n100000\nexit code: 0")
    assert "bytes of output cut" in result
    assert len(result) < 21_000


@pytest.mark.timeout(60)
def test_timeout_kills_the_command(tmp_path: Path) -> None:
    result = terminal("echo begin; sleep 3600", _ctx(tmp_path), timeout=1)
    assert result.startswith("begin\n")
    assert "timed out after 1 s" in result


def test_interrupt_kills_the_whole_process_group(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    results: list[str] = []
    command = "echo $$ > leader.pid; sleep 3600 & sleep 3600; wait"
    worker = threading.Thread(target=lambda: results.append(terminal(command, ctx)))
    worker.start()
    pid_file = tmp_path / "leader.pid"
    _wait_for(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    pgid = int(pid_file.read_text())
    _wait_for(lambda: len(_live_members(pgid)) >= 3)  # bash and both sleeps
    members = _live_members(pgid)

    ctx.interrupt.set()
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert "interrupted by the user" in results[0]
    assert _live_members(pgid) == []
    assert not any(_alive(pid) for pid in members)


@pytest.mark.timeout(60)
def test_background_children_do_not_hang_the_call(tmp_path: Path) -> None:
    result = terminal("sleep 3600 & echo $! > child.pid; echo started", _ctx(tmp_path))
    assert result.startswith("started\n")
    assert "background=true" in result
    assert not _alive(int((tmp_path / "child.pid").read_text()))


def test_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ToolError):
        terminal("   ", _ctx(tmp_path))
    with pytest.raises(ToolError):
        terminal("echo hi", _ctx(tmp_path), timeout=-1)


def test_background_process_lifecycle(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, session_id="bg-session")
    started = terminal("echo ready; sleep 30", ctx, background=True)
    process_id = started.split(" as ")[1].split(" ")[0]

    assert process_id in process("list", ctx)
    _wait_for(lambda: "ready" in process("log", ctx, id=process_id))
    assert "running" in process("poll", ctx, id=process_id)

    other_session = _ctx(tmp_path, session_id="someone-else")
    assert process("list", other_session) == "No background processes."
    with pytest.raises(ToolError):
        process("kill", other_session, id=process_id)

    assert "stopped" in process("kill", ctx, id=process_id)
    assert "exited" in process("poll", ctx, id=process_id)


def test_background_processes_die_with_the_interpreter(tmp_path: Path) -> None:
    script = (
        "import threading, pathlib, time\n"
        "from talaria.tools.base import ToolContext\n"
        "from talaria.tools.builtin.terminal import terminal\n"
        f"ctx = ToolContext('t', 's', pathlib.Path({str(tmp_path)!r}), pathlib.Path('.'),\n"
        "                  threading.Event(), lambda e: None)\n"
        "print(terminal('echo $$ > bg.pid; exec sleep 60', ctx, background=True))\n"
        "pid_file = ctx.cwd / 'bg.pid'\n"
        "while not (pid_file.exists() and pid_file.read_text().strip()):\n"
        "    time.sleep(0.05)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=30, capture_output=True)
    pid = int((tmp_path / "bg.pid").read_text())
    _wait_for(lambda: not _alive(pid), timeout=5)


def test_terminal_tools_are_registered_with_their_public_names() -> None:
    tools = {tool.name: tool for tool in builtin_tools()}
    assert tools["terminal"].toolset == tools["process"].toolset == "terminal"
    assert tools["terminal"].parameters["required"] == ["command"]
    assert set(tools["terminal"].parameters["properties"]) == {
        "command",
        "timeout",
        "background",
        "escalate",
        "justification",
    }


def test_commands_get_an_allowlisted_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-openai")
    monkeypatch.setenv("GROQ_API_KEY", "gsk-secret-groq")
    monkeypatch.setenv("TALARIA_SERVER_KEY", "server-secret")
    monkeypatch.setenv("PROJECT_SETTING", "visible")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    script = (
        'echo "[$OPENAI_API_KEY][$GROQ_API_KEY][$TALARIA_SERVER_KEY][$PROJECT_SETTING][$LC_ALL]"'
    )
    assert "[][][][][C.UTF-8]" in terminal(script, _ctx(tmp_path))
    monkeypatch.setenv("TALARIA_TOOL_ENV_PASSTHROUGH", "GROQ_API_KEY, PROJECT_SETTING")
    assert "[][gsk-secret-groq][][visible][C.UTF-8]" in terminal(script, _ctx(tmp_path))


def test_background_processes_follow_the_conversation_into_a_new_session(tmp_path: Path) -> None:
    from talaria.events import SessionContinued
    from talaria.tools.builtin.processes import follow_session

    before = _ctx(tmp_path, session_id="before-compression")
    started = terminal("sleep 30", before, background=True)
    process_id = started.split(" as ")[1].split(" ")[0]
    follow_session(SessionContinued("before-compression", "after-compression"))
    after = _ctx(tmp_path, session_id="after-compression")
    assert process_id in process("list", after)
    assert process("list", before) == "No background processes."
    assert "stopped" in process("kill", after, id=process_id)


def test_the_terminal_is_offered_only_where_bash_is_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (terminal_tool,) = [t for t in builtin_tools() if t.name == "terminal"]
    assert terminal_tool.available()
    not_executable = tmp_path / "bash"
    not_executable.write_text("#!/bin/sh\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert not terminal_tool.available(), "a bash that cannot run is no bash"
    not_executable.chmod(0o755)
    assert terminal_tool.available()
