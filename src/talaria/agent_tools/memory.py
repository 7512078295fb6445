"""Persistent memory: two small Markdown files the agent curates across sessions.

MEMORY.md holds the agent's own notes (environment facts, conventions, lessons), USER.md what
it knows about the user. Entries are separated by a line holding only "§". The files are
bounded in characters because their text is replayed into every system prompt; writes are
scanned because a poisoned entry would persist; a file lock keeps two agents from losing
each other's writes.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from talaria.events import Notice
from talaria.tools.base import Tool, ToolContext, ToolError

if TYPE_CHECKING:
    from talaria.agent_tools.services import AgentServices

SEPARATOR = "\n§\n"
FILES = {"memory": "MEMORY.md", "user": "USER.md"}
LABELS = {
    "memory": "MEMORY (your notes from earlier sessions)",
    "user": "USER PROFILE (what you know about the user)",
}
ACTIONS = ("add", "replace", "remove")


class MemoryStore:
    """Reads and edits home/memories/{MEMORY,USER}.md; every edit is a locked
    read-modify-write followed by an atomic replace of the file."""

    def __init__(
        self, home: Path, memory_char_limit: int = 2200, user_char_limit: int = 1375
    ) -> None:
        self.directory = Path(home) / "memories"
        self.limits = {"memory": memory_char_limit, "user": user_char_limit}

    def path(self, target: str) -> Path:
        return self.directory / FILES[target]

    def entries(self, target: str) -> list[str]:
        try:
            text = self.path(target).read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        return [entry.strip() for entry in text.split(SEPARATOR) if entry.strip()]

    def usage(self, target: str, entries: list[str] | None = None) -> str:
        used = len(SEPARATOR.join(self.entries(target) if entries is None else entries))
        return f"{target} {used:,}/{self.limits[target]:,} chars"

    def snapshot(self) -> str:
        """Both files as one labelled block for the system prompt ("" when both are empty).
        The caller freezes it at session start so the prompt prefix stays byte-stable."""
        current = {target: self.entries(target) for target in FILES}
        if not any(current.values()):
            return ""
        blocks = [
            f"{LABELS[target]} [{self.usage(target, entries)}]\n"
            + (SEPARATOR.join(entries) if entries else "(empty)")
            for target, entries in current.items()
        ]
        return "\n\n".join(blocks)

    def apply(
        self,
        action: str,
        target: str,
        content: str | None = None,
        old_text: str | None = None,
    ) -> dict[str, Any]:
        """Add, replace or remove one entry. Never raises for bad input: the result says
        what went wrong so the model can correct itself."""
        if action not in ACTIONS:
            return _failure(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
        if target not in FILES:
            return _failure(f"unknown target {target!r}; use 'memory' or 'user'")
        text = (content or "").strip()
        if action != "remove":
            problem = _check_content(text)
            if problem:
                return _failure(problem)
        if action != "add" and not (old_text or "").strip():
            return _failure(f"{action} needs old_text: a piece of the entry to change")
        with self._locked():
            entries = self.entries(target)
            edited = _edit(entries, action, text, (old_text or "").strip())
            if isinstance(edited, dict):
                return edited
            if edited == entries:
                return {
                    "ok": True,
                    "message": "already saved; nothing changed",
                    "usage": self.usage(target, entries),
                }
            used = len(SEPARATOR.join(edited))
            if used > self.limits[target] and used > len(SEPARATOR.join(entries)):
                return _failure(
                    f"{target} would hold {used:,} chars, over its {self.limits[target]:,} "
                    "limit; remove or shorten entries first (replace merges two into one)",
                    current_entries=entries,
                    usage=self.usage(target, entries),
                )
            self._write(target, edited)
        verb = {"add": "added to", "replace": "replaced in", "remove": "removed from"}[action]
        return {
            "ok": True,
            "message": f"entry {verb} {target}",
            "usage": self.usage(target, edited),
            "entry_count": len(edited),
        }

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """An exclusive flock on a side file: held across read-modify-write so concurrent
        agents (threads or processes) serialise their edits instead of losing one."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / ".lock", "a+b") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock_file, fcntl.LOCK_UN)

    def _write(self, target: str, entries: list[str]) -> None:
        """Write a temporary file and rename it over the old one: a crash never leaves
        a half-written memory file."""
        import tempfile

        body = SEPARATOR.join(entries) + ("\n" if entries else "")
        handle, temp_name = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as temp:
                temp.write(body)
                temp.flush()
                os.fsync(temp.fileno())
            os.replace(temp_name, self.path(target))
        except BaseException:
            Path(temp_name).unlink(missing_ok=True)
            raise


def _failure(error: str, **details: Any) -> dict[str, Any]:
    return {"ok": False, "error": error, **details}


def _check_content(text: str) -> str | None:
    if not text:
        return "content is empty; give the text of the entry"
    if "§" in text.splitlines():
        return "content may not contain a line holding only '§' (it separates entries)"
    from talaria.prompt.injection import scan_secrets, scan_text  # compiled on the first write

    findings = scan_text(text) + scan_secrets(text)
    if findings:
        return (
            "refused: memory is replayed into every future session, and this entry looks "
            "unsafe: " + "; ".join(findings)
        )
    return None


def _edit(
    entries: list[str], action: str, content: str, old_text: str
) -> list[str] | dict[str, Any]:
    """The entry list after the edit, or a failure dict when old_text does not pick
    exactly one entry."""
    if action == "add":
        return entries if content in entries else [*entries, content]
    matches = [i for i, entry in enumerate(entries) if old_text in entry]
    if not matches:
        return _failure(f"no entry contains {old_text!r}", current_entries=entries)
    if len(matches) > 1:
        return _failure(
            f"{len(matches)} entries contain {old_text!r}; quote more of the one you mean",
            matching_entries=[entries[i] for i in matches],
        )
    index = matches[0]
    if action == "remove":
        return entries[:index] + entries[index + 1 :]
    return [*entries[:index], content, *entries[index + 1 :]]


def _memory(
    ctx: ToolContext[AgentServices],
    action: str,
    target: str,
    content: str | None = None,
    old_text: str | None = None,
) -> dict[str, Any]:
    store = ctx.services.memory
    if store is None:
        raise ToolError("memory is disabled")
    result: dict[str, Any] = store.apply(action, target, content=content, old_text=old_text)
    if str(result.get("error", "")).startswith("refused:"):
        ctx.emit(Notice(level="warning", message=f"memory write refused: {result['error']}"))
    return result


DESCRIPTION = (
    "Save durable facts to persistent memory, which is shown to you at the start of every "
    "future session. target 'memory': your own notes (environment facts, project conventions, "
    "lessons learned); target 'user': the user's preferences and details. action 'add' saves "
    "a new entry (content); 'replace' swaps the entry containing old_text for content; "
    "'remove' deletes the entry containing old_text. Space is limited: keep entries short, "
    "merge related ones, and do not save secrets or transient task state."
)


MEMORY_TOOL = Tool(
    name="memory",
    description=DESCRIPTION,
    parameters={
        "type": "object",
        "properties": {
            "action": {
                "type": "string",
                "enum": list(ACTIONS),
                "description": "add, replace or remove an entry",
            },
            "target": {
                "type": "string",
                "enum": list(FILES),
                "description": "memory (your notes) or user (the user profile)",
            },
            "content": {"type": "string", "description": "the entry text (add and replace)"},
            "old_text": {
                "type": "string",
                "description": "a unique piece of the entry to replace or remove",
            },
        },
        "required": ["action", "target"],
        "additionalProperties": False,
    },
    handler=_memory,
    toolset="memory",
    context_param="ctx",
)
