"""How a tool call looks in the editor: its kind, a human title and the files it touches."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from talaria.policy.sensitive_paths import resolve_path

TITLE_CHARS = 80

KINDS: dict[str, str] = {
    "read_file": "read",
    "write_file": "edit",
    "patch": "edit",
    "terminal": "execute",
    "process": "execute",
    "search_files": "search",
    "session_search": "search",
    "todo": "think",
}
"""ACP tool kinds by talaria tool name; any other tool is "other"."""

EDIT_TOOLS = frozenset({"write_file", "patch"})
_PATH_TOOLS = frozenset({"read_file", "write_file", "patch", "search_files"})


@dataclass(frozen=True, slots=True)
class Place:
    path: str
    line: int | None = None


@dataclass(frozen=True, slots=True)
class CallView:
    title: str
    kind: str
    places: list[Place] = field(default_factory=list)


def describe_call(name: str, arguments: dict[str, Any], cwd: Path) -> CallView:
    """The editor's view of a call (titles never hold more than one short line)."""
    titler = _TITLES.get(name, _generic_title)
    title = one_line(titler(name, arguments))
    return CallView(title, KINDS.get(name, "other"), _places(name, arguments, cwd))


def one_line(text: str) -> str:
    """The text on one line of at most TITLE_CHARS (editors show titles in one row)."""
    line = " ".join(text.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"


def _places(name: str, arguments: dict[str, Any], cwd: Path) -> list[Place]:
    raw = arguments.get("path")
    if not isinstance(raw, str) or not raw or name not in _PATH_TOOLS:
        return []
    line = arguments.get("offset") if name == "read_file" else None
    return [Place(str(resolve_path(raw, cwd)), line if isinstance(line, int) else None)]


def _path(arguments: dict[str, Any], default: str = "") -> str:
    value = arguments.get("path", default)
    return str(value) if value else default


def _read_title(_: str, args: dict[str, Any]) -> str:
    offset = args.get("offset")
    suffix = f" (from line {offset})" if isinstance(offset, int) and offset > 1 else ""
    return f"Read {_path(args)}{suffix}"


def _search_title(_: str, args: dict[str, Any]) -> str:
    where = _path(args, ".")
    if args.get("target") == "files":
        return f"Find files named {args.get('pattern', '')!s} in {where}"
    return f"Search for {args.get('pattern', '')!s} in {where}"


def _terminal_title(_: str, args: dict[str, Any]) -> str:
    background = " (in the background)" if args.get("background") else ""
    outside = " (outside the sandbox)" if args.get("escalate") else ""
    return f"Run {args.get('command', '')!s}{background}{outside}"


def _process_title(_: str, args: dict[str, Any]) -> str:
    return f"Background process: {args.get('action', '')!s} {args.get('id', '')!s}"


def _todo_title(_: str, args: dict[str, Any]) -> str:
    return "Update the plan" if args.get("todos") is not None else "Read the plan"


def _generic_title(name: str, args: dict[str, Any]) -> str:
    if name.startswith("mcp__"):
        server, _, tool = name[len("mcp__") :].partition("__")
        return f"{server}: {tool}"
    first = next((str(v) for v in args.values() if isinstance(v, str) and v.strip()), "")
    return f"{name}: {first}" if first else name


_TITLES: dict[str, Callable[[str, dict[str, Any]], str]] = {
    "read_file": _read_title,
    "write_file": lambda _, a: f"Write {_path(a)}",
    "patch": lambda _, a: f"Edit {_path(a)}",
    "terminal": _terminal_title,
    "process": _process_title,
    "search_files": _search_title,
    "session_search": lambda _, a: f"Search past sessions for {a.get('query', '')!s}",
    "todo": _todo_title,
    "memory": lambda _, a: f"Memory: {a.get('action', '')!s} ({a.get('target', '')!s})",
    "delegate_task": lambda _, a: f"Delegate: {a.get('goal') or 'several tasks'!s}",
}
