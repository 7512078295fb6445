"""The approval seam: which tool calls need a human's yes, and remembering the answers.

The command analysis itself lives in `talaria.tools.command_safety`; this module turns its
verdict into a decision, asks the approver, and keeps the session's and the config's grants.
Fail closed: no approver, an approver that raises, or a timeout means deny.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Decision = Literal["once", "session", "always", "deny"]
DECISIONS: tuple[str, ...] = ("once", "session", "always", "deny")


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the approver is shown. ``pattern`` is what a session/always grant remembers."""

    command: str
    reason: str
    tool_name: str
    arguments: dict[str, Any]
    pattern: str


@dataclass(frozen=True, slots=True)
class Assessment:
    """The verdict on one tool call. ``blocked`` is the hard floor: no approval can lift it."""

    command: str
    reason: str
    pattern: str
    blocked: bool = False


Approver = Callable[[ApprovalRequest], str]


@dataclass
class ApprovalState:
    """Grants that outlive one call: this session's, and the persisted allowlist."""

    mode: str = "manual"
    """manual: ask; off: never ask (the hard floor still applies)."""
    allowlist: set[str] = field(default_factory=set)
    session_grants: set[str] = field(default_factory=set)
    persist_allowlist: Callable[[str], None] | None = None

    def is_granted(self, pattern: str) -> bool:
        return pattern in self.session_grants or pattern in self.allowlist

    def record(self, decision: str, pattern: str) -> None:
        if decision == "session":
            self.session_grants.add(pattern)
        elif decision == "always":
            self.allowlist.add(pattern)
            if self.persist_allowlist is not None:
                self.persist_allowlist(pattern)


def assess_tool_call(
    tool_name: str, arguments: dict[str, Any], cwd: Path, home: Path
) -> Assessment | None:
    """The policy's verdict on one call (None: nothing to approve)."""
    assessor = _ASSESSORS.get(tool_name)
    return assessor(arguments, cwd, home) if assessor else None


def _assess_terminal(arguments: dict[str, Any], cwd: Path, home: Path) -> Assessment | None:
    from talaria.tools.command_safety import assess_command

    command = arguments.get("command")
    return assess_command(command) if isinstance(command, str) else None


def _assess_write(arguments: dict[str, Any], cwd: Path, home: Path) -> Assessment | None:
    from talaria.tools.builtin.files import write_path_of
    from talaria.tools.sensitive_paths import assess_file_write

    path = write_path_of("write_file", arguments, cwd)
    return assess_file_write(path, home) if path is not None else None


_ASSESSORS: dict[str, Callable[[dict[str, Any], Path, Path], Assessment | None]] = {
    "terminal": _assess_terminal,
    "write_file": _assess_write,
    "patch": _assess_write,
}
