"""Background processes started with `terminal(background=true)`, and the `process` tool.

Servers, watchers and long builds must not block a turn, but they must not outlive the agent
either: each runs in its own process group with its output in a log file, belongs to the task
that started it (a task sees and stops only its own), and every one still running is killed
when the interpreter exits.
"""

from __future__ import annotations

import atexit
import itertools
import os
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from talaria.events import SessionContinued
from talaria.tools.base import Tool, ToolContext, ToolError
from talaria.tools.builtin.terminal import kill_group, spawn_shell
from talaria.tools.process_tracking import REGISTRY as TRACKING
from talaria.tools.process_tracking import Tracked

LOG_TAIL = 10_000
POLL_TAIL = 2_000


@dataclass
class BackgroundProcess:
    """A command started in the background, with the log of its output."""

    id: str
    command: str
    owner: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    started: float
    tracked: Tracked

    @property
    def pid(self) -> int:
        return self.proc.pid

    def status(self) -> str:
        code = self.proc.poll()
        runtime = time.monotonic() - self.started
        state = "running" if code is None else f"exited with code {code}"
        return f"{self.id} [{state}, {runtime:.0f} s] {self.command}"

    def log_tail(self, limit: int) -> str:
        try:
            with open(self.log_path, "rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                handle.seek(max(0, size - limit))
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            return "(no output)"
        if size > limit:
            text = f"... [{size - limit} earlier bytes not shown] ...\n{text}"
        return text or "(no output)"


class ProcessRegistry:
    """All background processes of this interpreter, grouped by the task that started them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._processes: dict[str, BackgroundProcess] = {}
        self._ids = itertools.count(1)
        self._log_dir: Path | None = None

    def start(
        self, command: str, cwd: str, owner: str, sandbox: Sequence[str] = ()
    ) -> BackgroundProcess:
        """Start `command` (confined by the `sandbox` argv prefix) with its output logged."""
        with self._lock:
            process_id = f"bg{next(self._ids)}"
            if self._log_dir is None:
                import tempfile

                self._log_dir = Path(tempfile.mkdtemp(prefix="talaria-processes-"))
            log_path = self._log_dir / f"{process_id}.log"
        tracked = TRACKING.new(owner, background=True)
        with open(log_path, "wb") as log:
            proc = spawn_shell(command, cwd, log, sandbox, tracked)
        started = BackgroundProcess(
            process_id, command, owner, proc, log_path, time.monotonic(), tracked
        )
        with self._lock:
            self._processes[process_id] = started
        return started

    def get(self, owner: str, process_id: str | None) -> BackgroundProcess:
        if not process_id:
            raise ToolError("this action needs the id of a background process (e.g. 'bg1')")
        with self._lock:
            found = self._processes.get(process_id)
        if found is None or found.owner != owner:
            known = ", ".join(p.id for p in self.of_owner(owner)) or "none"
            raise ToolError(f"no background process {process_id!r}; this task has: {known}")
        return found

    def of_owner(self, owner: str) -> list[BackgroundProcess]:
        with self._lock:
            return [p for p in self._processes.values() if p.owner == owner]

    def kill(self, process: BackgroundProcess) -> str:
        if process.proc.poll() is None:
            kill_group(process.proc)
        code = process.proc.wait()
        process.tracked.kill(grace=0.2)
        process.tracked.release()
        return f"{process.id} stopped (exit code {code})."

    def kill_owner(self, owner: str) -> None:
        """Stop every background process a task started (call when the task ends)."""
        for process in self.of_owner(owner):
            self.kill(process)

    def kill_all(self) -> None:
        with self._lock:
            processes = list(self._processes.values())
            log_dir, self._log_dir = self._log_dir, None
        for process in processes:
            self.kill(process)
        if log_dir is not None:
            import shutil

            shutil.rmtree(log_dir, ignore_errors=True)


REGISTRY = ProcessRegistry()
atexit.register(REGISTRY.kill_all)


def kill_session_processes(owner: str) -> None:
    """Stop the background processes of a session that ended."""
    REGISTRY.kill_owner(owner)


def follow_session(event: SessionContinued) -> None:
    """A conversation continued in a new session (compression) keeps its background
    processes."""
    for process in REGISTRY.of_owner(event.previous_id):
        process.owner = event.session_id
        process.tracked.owner = event.session_id


def process(action: str, ctx: ToolContext, id: str | None = None) -> str:
    """List, poll, read the log of, or kill a background process of this session."""
    if action == "list":
        processes = REGISTRY.of_owner(ctx.session_id)
        return "\n".join(p.status() for p in processes) or "No background processes."
    target = REGISTRY.get(ctx.session_id, id)
    if action == "poll":
        return f"{target.status()}\nrecent output:\n{target.log_tail(POLL_TAIL)}"
    if action == "log":
        return target.log_tail(LOG_TAIL)
    if action == "kill":
        return REGISTRY.kill(target)
    raise ToolError(f"unknown action {action!r}; use list, poll, log or kill")


PROCESS_TOOL = Tool(
    name="process",
    description=(
        "Manage background processes started with terminal(background=true): 'list' them, "
        "'poll' one for its state and recent output, read its 'log', or 'kill' it and its "
        "children."
    ),
    parameters={
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["list", "poll", "log", "kill"]},
            "id": {"type": "string", "description": "The process id, e.g. 'bg1'."},
        },
        "required": ["action"],
        "additionalProperties": False,
    },
    handler=process,
    toolset="terminal",
    context_param="ctx",
)
