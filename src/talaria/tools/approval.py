"""The approval seam: which tool calls need a human's yes, and remembering the answers.

The command analysis itself lives in `talaria.tools.command_safety`; this module turns its
verdict into a decision, asks the approver, and keeps the session's and the config's grants.
Fail closed: no approver, an approver that raises, or a timeout means deny.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
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
