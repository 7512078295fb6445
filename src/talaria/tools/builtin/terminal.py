"""The `terminal` tool: run one shell command and report what it printed and how it ended.

Each command runs with `bash -c` in a session (process group) of its own, so a timeout or an
interrupt can kill it and every child it started, not just the shell. Stdin is /dev/null and
pagers/editors are disabled: nothing can sit waiting for a human who is not there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from talaria.tools.base import Tool, ToolContext, ToolError
from talaria.tools.process_tracking import REGISTRY as TRACKING
from talaria.tools.process_tracking import TAG_VARIABLE, Tracked, start_tracking
from talaria.tools.sandbox import confine, failure_hint
from talaria.tools.sandbox_seccomp import direct

DEFAULT_TIMEOUT = 180.0
MAX_TIMEOUT = 600.0
KEEP_HEAD = 10_000
KEEP_TAIL = 10_000
POLL_INTERVAL = 0.05
KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL for a group that must stop."""
DRAIN_GRACE = 1.0
"""How long output may keep flowing after the shell exits (children still holding the pipe)."""


ENV_ALLOWED = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "COLORTERM",
        "NO_COLOR",
        "TMPDIR",
        "TZ",
        "LANG",
        "LANGUAGE",
        "http_proxy",
        "https_proxy",
        "ftp_proxy",
        "all_proxy",
        "no_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "FTP_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "VIRTUAL_ENV",
        "JAVA_HOME",
        "GOPATH",
        "GOROOT",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "CI",
    }
)
"""What a command inherits from the agent's environment (plus every `LC_*` locale variable):
an allowlist, so a key the agent holds under any name (`GROQ_API_KEY`, `TALARIA_SERVER_KEY`,
a cloud token) never reaches a command the model wrote. More names, comma-separated, in
TALARIA_TOOL_ENV_PASSTHROUGH."""


def shell_env() -> dict[str, str]:
    """The environment commands run with: the allowlisted part of the agent's own, the names
    in TALARIA_TOOL_ENV_PASSTHROUGH, and nothing interactive."""
    passthrough = set(
        os.environ.get("TALARIA_TOOL_ENV_PASSTHROUGH", "").replace(" ", "").split(",")
    )
    env = {
        name: value
        for name, value in os.environ.items()
        if name in ENV_ALLOWED or name.startswith("LC_") or name in passthrough
    }
    env.update(PAGER="cat", GIT_PAGER="cat", GIT_EDITOR="true")
    return env


def spawn_shell(
    command: str,
    cwd: str,
    output: int | IO[bytes],
    sandbox: Sequence[str] = (),
    tracked: Tracked | None = None,
    keep_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start `bash -c command` leading a new process group, stdout and stderr into `output`;
    `sandbox` is the argv prefix that confines it (`talaria.tools.sandbox.confine`); with
    `tracked`, every process it starts carries its tag (see `process_tracking`); `keep_fds`
    are descriptors it inherits."""
    env = shell_env()
    if tracked is not None:
        env[TAG_VARIABLE] = tracked.tag
    prefix, seccomp = direct(sandbox)
    try:
        proc = subprocess.Popen(
            [*prefix, "bash", "-c", command],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=(*keep_fds, *(() if seccomp is None else (seccomp,))),
        )
    except OSError as exc:
        raise ToolError(f"could not start bash in {cwd}: {exc}") from None
    finally:
        if seccomp is not None:
            os.close(seccomp)
    if tracked is not None:
        start_tracking(tracked, proc.pid)
    return proc


def kill_group(proc: subprocess.Popen[bytes], grace: float = KILL_GRACE) -> None:
    """SIGTERM the process group led by `proc`, then SIGKILL whatever is alive after `grace`."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader so that it does not count as alive
        if not group_alive(proc.pid):
            return
        time.sleep(0.02)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return


def group_alive(pgid: int) -> bool:
    """Is any process of the group still running? Zombies do not count: in a container the
    init process may never reap them, and they hold nothing."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _has_live_member(pgid) if os.path.isdir("/proc") else True


def _has_live_member(pgid: int) -> bool:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


class OutputBuffer:
    """Keeps the first and last bytes of a stream of any size, and counts what it dropped."""

    def __init__(self, head: int = KEEP_HEAD, tail: int = KEEP_TAIL) -> None:
        self._head_limit, self._tail_limit = head, tail
        self.head, self.tail = bytearray(), bytearray()
        self.total = 0

    def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > self._tail_limit:
            del self.tail[: len(self.tail) - self._tail_limit]

    def text(self) -> str:
        cut = self.total - len(self.head) - len(self.tail)
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if cut <= 0:
            return head + tail
        return f"{head}\n\n... [{cut} bytes of output cut] ...\n\n{tail}"


def _pump(stream: int, buffer: OutputBuffer) -> None:
    while chunk := os.read(stream, 65536):
        buffer.write(chunk)


@dataclass(slots=True)
class RunResult:
    """How a foreground command ended and what it printed."""

    exit_code: int | None
    output: str
    stopped: str | None
    """Why the command was killed ("timeout", "interrupt"), or None when it ended by itself."""
    stragglers_killed: bool = False


def run_command(
    command: str,
    cwd: str,
    timeout: float,
    interrupt: threading.Event,
    sandbox: Sequence[str] = (),
    owner: str = "",
    keep_fds: Sequence[int] = (),
) -> RunResult:
    """Run `command` to completion, a timeout, or an interrupt (polled every 0.05 s). Every
    process it started ends with it, however it detached (see `process_tracking`)."""
    read_end, write_end = os.pipe()
    tracked = TRACKING.new(owner)
    try:
        proc = spawn_shell(command, cwd, write_end, sandbox, tracked, keep_fds)
    except ToolError:
        os.close(read_end)
        tracked.release()
        raise
    finally:
        os.close(write_end)
    buffer = OutputBuffer()
    reader = threading.Thread(target=_pump, args=(read_end, buffer), daemon=True)
    reader.start()
    try:
        stopped = _wait(proc, timeout, interrupt)
        if stopped is not None:
            kill_group(proc)
        exit_code = proc.wait()
        reader.join(DRAIN_GRACE)
        stragglers = tracked.kill(grace=0.2) > 0
    finally:
        tracked.release()
    reader.join(KILL_GRACE)
    if not reader.is_alive():
        os.close(read_end)
    return RunResult(exit_code, buffer.text(), stopped, stragglers)


def _wait(proc: subprocess.Popen[bytes], timeout: float, interrupt: threading.Event) -> str | None:
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if interrupt.wait(POLL_INTERVAL):
            return "interrupt"
        if time.monotonic() >= deadline:
            return "timeout"
    return None


def format_result(result: RunResult, timeout: float) -> str:
    """The text the model reads: output first, then how the command ended."""
    lines = [result.output.rstrip("\n") or "(no output)"]
    if result.stopped == "timeout":
        lines.append(
            f"[timed out after {timeout:g} s: the command and its child processes were killed]"
        )
    elif result.stopped == "interrupt":
        lines.append("[interrupted by the user: the command and its child processes were killed]")
    if result.stragglers_killed:
        lines.append(
            "[background processes it left running were stopped; use "
            "terminal(background=true) for long-running processes]"
        )
    lines.append(f"exit code: {result.exit_code}")
    return "\n".join(lines)


def command_timeout(value: float | None) -> float:
    """The seconds a command may run: absent or 0 (what small models send for "none given")
    is the default."""
    if value is None or value == 0:
        return DEFAULT_TIMEOUT
    if value < 0:
        raise ToolError("timeout must be a positive number of seconds")
    return min(float(value), MAX_TIMEOUT)


def _check_command(command: str) -> None:
    if not command.strip():
        raise ToolError("`command` is empty; give the command line to run")


def terminal(
    command: str,
    ctx: ToolContext,
    timeout: float | None = None,
    background: bool = False,
    escalate: bool = False,
    justification: str | None = None,
) -> str:
    """Run a shell command in the task's working directory, inside the sandbox unless the
    call was approved to run outside it (`escalate`: the approval seam asks first, showing
    the `justification`)."""
    _check_command(command)
    prefix = [] if escalate else confine(ctx.sandbox, ctx.cwd, ctx.emit)
    if background:
        from talaria.tools.builtin.processes import REGISTRY

        started = REGISTRY.start(command, str(ctx.cwd), ctx.session_id, prefix)
        return (
            f"Started in the background as {started.id} (pid {started.pid}). Check it with "
            f"process(action='poll', id='{started.id}'); stop it with action='kill'."
        )
    limit = command_timeout(timeout)
    result = run_command(command, str(ctx.cwd), limit, ctx.interrupt, prefix, ctx.session_id)
    text = format_result(result, limit) + _new_git(ctx, confined=bool(prefix), escalated=escalate)
    if (
        prefix
        and ctx.sandbox is not None
        and (hint := failure_hint(ctx.sandbox, Path(ctx.cwd), result.output, result.exit_code))
    ):
        return f"{text}\n{hint}"
    return text


def _new_git(ctx: ToolContext, confined: bool, escalated: bool) -> str:
    """What became of git metadata the command created (`talaria.tools.git_watch`)."""
    if ctx.sandbox is None or not (confined or escalated):
        return ""
    moved = ctx.sandbox.after_command(escalated=escalated)
    if not moved:
        return ""
    names = ", ".join(str(path) for path in moved)
    return (
        "\n[sandbox: this command created git metadata, whose hooks and config git would run "
        f"outside the sandbox; it was renamed aside ({names}). To create or clone a "
        "repository, call terminal again with escalate=true and a justification: the user "
        "will be asked.]"
    )


def _has_bash() -> bool:
    """`shutil.which("bash")`, without importing shutil and its archive modules (7 ms) at the
    start of every process that offers the tool."""
    return any(
        os.path.isfile(candidate) and os.access(candidate, os.X_OK)
        for candidate in (os.path.join(folder, "bash") for folder in os.get_exec_path())
    )


TERMINAL_TOOL = Tool(
    name="terminal",
    description=(
        "Run a shell command with bash in the working directory and return its combined "
        "stdout/stderr and exit code. Stdin is closed, so interactive programs fail instead of "
        "waiting: pass flags such as -y. Long output is cut in the middle. Default timeout "
        f"{DEFAULT_TIMEOUT:g} s, at most {MAX_TIMEOUT:g} s. For servers and watchers set "
        "background=true and manage them with the process tool. Commands run in a sandbox "
        "(by default only the working directory and /tmp are writable and there is no "
        "network); when one fails because of it, the result says so, and you may call again "
        "with escalate=true and a justification to ask the user to run it outside."
    ),
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line to run with bash."},
            "timeout": {
                "type": "number",
                "minimum": 0,
                "description": f"Seconds before the command is killed (default "
                f"{DEFAULT_TIMEOUT:g}, also when 0; max {MAX_TIMEOUT:g}).",
            },
            "background": {
                "type": "boolean",
                "description": "Start the command and return at once with a process id.",
            },
            "escalate": {
                "type": "boolean",
                "description": "Ask the user to run this command outside the sandbox (only "
                "after it failed because of the sandbox); give a justification.",
            },
            "justification": {
                "type": "string",
                "description": "With escalate: why the command needs to run outside the "
                "sandbox (shown to the user).",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    },
    handler=terminal,
    toolset="terminal",
    context_param="ctx",
    precheck=lambda arguments: _check_command(arguments["command"]),
    check=_has_bash,
    timeout=MAX_TIMEOUT + 30,
)
