"""Batch input and output: the tasks file, the results file, and what makes a run resumable.

Input is JSONL, one task a line: `{"id": ..., "prompt": ..., optional "model", "system", ...}`.
Every line is checked before anything runs, so a bad line costs nothing. Output is JSONL, one
line per finished task, appended and flushed as each task ends; a task whose id is already in
the output is not run again, which is what makes a killed batch resumable.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from talaria.core import failed

OPTIONAL_STRINGS = ("model", "system", "provider", "base_url", "api_mode")
ALLOWED_KEYS = ("id", "prompt", *OPTIONAL_STRINGS, "max_turns", "toolsets")
MAX_REPORTED = 10


class BatchError(ValueError):
    """The tasks file or the results file cannot be used as written."""


@dataclass(frozen=True, slots=True)
class BatchTask:
    id: str
    prompt: str
    options: dict[str, Any] = field(default_factory=dict)
    """Per-task overrides: model, system, provider, base_url, api_mode, max_turns, toolsets."""


def load_tasks(path: Path) -> list[BatchTask]:
    """Every task of the file, or one `BatchError` listing the bad lines (nothing runs)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BatchError(f"{path}: cannot be read: {exc}") from None
    tasks: list[BatchTask] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            task = _parse_task(line)
        except ValueError as exc:
            problems.append(f"{path}:{number}: {exc}")
            continue
        if task.id in seen:
            problems.append(f"{path}:{number}: id {task.id!r} repeats line {seen[task.id]}")
            continue
        seen[task.id] = number
        tasks.append(task)
    if problems:
        more = len(problems) - MAX_REPORTED
        shown = problems[:MAX_REPORTED] + ([f"... and {more} more"] if more > 0 else [])
        raise BatchError("bad task lines, nothing was run:\n  " + "\n  ".join(shown))
    if not tasks:
        raise BatchError(f"{path}: no tasks (one JSON object a line: {{'id', 'prompt'}})")
    return tasks


def _parse_task(line: str) -> BatchTask:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(ALLOWED_KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(ALLOWED_KEYS)}")
    task_id = data.get("id")
    if isinstance(task_id, bool) or not isinstance(task_id, str | int) or str(task_id) == "":
        raise ValueError(f"'id' must be a non-empty string or an integer, got {task_id!r}")
    prompt = data.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("'prompt' must be a non-empty string")
    options = {key: data[key] for key in ALLOWED_KEYS[2:] if data.get(key) is not None}
    for key in OPTIONAL_STRINGS:
        if key in options and not isinstance(options[key], str):
            raise ValueError(f"{key!r} must be a string")
    turns = options.get("max_turns")
    if turns is not None and (isinstance(turns, bool) or not isinstance(turns, int) or turns < 1):
        raise ValueError("'max_turns' must be a positive integer")
    toolsets = options.get("toolsets")
    if toolsets is not None and not (
        isinstance(toolsets, list) and all(isinstance(t, str) for t in toolsets)
    ):
        raise ValueError("'toolsets' must be a list of toolset names")
    return BatchTask(str(task_id), prompt, options)


def default_output(tasks_path: Path) -> Path:
    return tasks_path.with_name(tasks_path.stem + ".results.jsonl")


def result_line(task: BatchTask, result: Mapping[str, Any]) -> dict[str, Any]:
    """A task's trajectory and outcome, as one output line."""
    usage = result.get("usage") or {}
    line = {
        "id": task.id,
        "session_id": result.get("session_id"),
        "final_response": result.get("final_response"),
        "turn_exit_reason": result.get("turn_exit_reason"),
        "completed": bool(result.get("completed")),
        "api_calls": result.get("api_calls", 0),
        "model": result.get("model"),
        "usage": usage,
        "cost": usage.get("estimated_cost_usd"),
        "messages": result.get("messages", []),
    }
    if result.get("error"):
        line["error"] = result["error"]
    return line


def failure_line(task: BatchTask, exc: BaseException) -> dict[str, Any]:
    """The output line of a task that could not run at all (bad model, unreachable store)."""
    return result_line(
        task,
        {"turn_exit_reason": failed(type(exc).__name__), "error": str(exc) or repr(exc)},
    )


class ResultsFile:
    """The append-only results file: which ids are done, and a place to add more."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done: set[str] = set()
        self._handle: IO[str] | None = None

    def open(self) -> ResultsFile:
        """Read the ids already finished; cut a half-written last line (a crash mid-write)."""
        if self.path.exists():
            raw = self.path.read_bytes()
            if raw and not raw.endswith(b"\n"):
                raw = raw[: raw.rfind(b"\n") + 1]
                self.path.write_bytes(raw)
            for number, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
                try:
                    self.done.add(str(json.loads(line)["id"]))
                except (json.JSONDecodeError, KeyError, TypeError):
                    raise BatchError(
                        f"{self.path}:{number}: not a results line; use another --output"
                    ) from None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = self.path.open("a", encoding="utf-8")
        return self

    def write(self, line: dict[str, Any]) -> None:
        """Append one line and make it durable before the task counts as done."""
        assert self._handle is not None, "open() first"
        self._handle.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self.done.add(str(line["id"]))

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> ResultsFile:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
