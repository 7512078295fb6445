"""The approval seam: which tool calls need a human's yes, and remembering the answers.

The command analysis itself lives in `talaria.policy.command_safety`; this module turns its
verdict into a decision, asks the approver, and keeps the session's and the config's grants.
Fail closed: no approver, an approver that raises, or a timeout means deny. Asking itself is
an interaction request (`talaria.interaction`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from talaria.events import ApprovalRequested
from talaria.interaction import APPROVAL_DECISIONS

Decision = Literal["once", "session", "always", "deny"]
DECISIONS: tuple[str, ...] = APPROVAL_DECISIONS

ApprovalRequest = ApprovalRequested
"""What `approval_callback(request)` receives: the request event itself."""

ESCALATED = "(outside the sandbox)"
"""How an escalated command is shown to the user and remembered by a grant."""
SHELL_CONTROL = re.compile(r"[;&|`$<>(){}\n\\]")
"""Characters after which a prefix rule no longer describes what runs (a second command,
a substitution, a redirection)."""


@dataclass(frozen=True, slots=True)
class Assessment:
    """The verdict on one tool call. ``blocked`` is the hard floor: no approval can lift it.
    ``command`` is what the user is shown and what a grant remembers, exactly."""

    command: str
    reason: str
    pattern: str
    blocked: bool = False
    needs_a_human: bool = False
    """Only an answered approval (or the user's grant) lets it run: it would run outside
    the sandbox the user chose. With approvals off it is refused, never run unasked."""


@dataclass(frozen=True, slots=True)
class Boundary:
    """Where a command would run: what the approval policy needs to know of the sandbox."""

    sandboxed: bool = True
    """Commands run inside a sandbox (or are refused: `sandbox.required`)."""
    full_access: bool = False
    """The user chose to run commands without a sandbox (`sandbox.mode: full-access`), so
    running one outside it crosses nothing."""


SANDBOXED = Boundary()
UNCONFINED = Boundary(sandboxed=False, full_access=True)


def rule_matches(rule: str, command: str) -> bool:
    """A grant covers the exact command it was given for, or, for a rule the user wrote as
    ``prefix*`` (Claude Code's ``npm run test:*``), simple commands starting with the prefix."""
    if rule == command:
        return True
    if not rule.endswith("*"):
        return False
    prefix = rule[:-1]
    if prefix.endswith(":"):
        prefix = prefix[:-1]
    rest = command[len(prefix) :]
    return (
        bool(prefix.strip())
        and command.startswith(prefix)
        and (not rest or not prefix[-1].isalnum() or not rest[0].isalnum())
        and not SHELL_CONTROL.search(command)
    )


@dataclass(frozen=True, slots=True)
class Denial:
    """A tool call that did not run for want of a yes: what the model was told instead."""

    tool_name: str
    command: str
    message: str


@dataclass
class ApprovalState:
    """Grants that outlive one call: this session's, and the persisted allowlist."""

    mode: str = "manual"
    """manual: ask; off: never ask. Off never widens the boundary: the floor still applies,
    and what needs a human (running outside the sandbox) is refused instead of asked."""
    allowlist: set[str] = field(default_factory=set)
    session_grants: set[str] = field(default_factory=set)
    persist_allowlist: Callable[[str], None] | None = None
    denials: list[Denial] = field(default_factory=list)
    """The calls refused so far (blocked, denied, unanswered): a sub-agent's parent reads
    them, so a child that was refused is never reported as a plain success."""

    def is_granted(self, command: str) -> bool:
        return any(rule_matches(rule, command) for rule in (*self.session_grants, *self.allowlist))

    def record(self, decision: str, command: str) -> None:
        if decision == "session":
            self.session_grants.add(command)
        elif decision == "always":
            self.allowlist.add(command)
            if self.persist_allowlist is not None:
                self.persist_allowlist(command)

    def end_session(self) -> None:
        """Session grants end with the session they were given in."""
        self.session_grants.clear()


Assessor = Callable[[dict[str, Any], Path, Path], Assessment | None]


def assess_tool_call(
    tool_name: str,
    arguments: dict[str, Any],
    cwd: Path,
    home: Path,
    own_assessor: Assessor | None = None,
    boundary: Boundary = SANDBOXED,
) -> Assessment | None:
    """The policy's verdict on one call (None: nothing to approve). A tool outside the fixed
    table may bring its own assessor (`Tool.assess`); the table wins for its names.
    `boundary` says whether a command would run inside the sandbox."""
    if tool_name == "terminal":
        return _assess_terminal(arguments, cwd, home, boundary)
    if tool_name == "execute_code":  # judged as the terminal judges running that program
        code = arguments.get("code")
        if not isinstance(code, str):
            return None
        return _assess_terminal({"command": python_command(code)}, cwd, home, boundary)
    assessor = _ASSESSORS.get(tool_name, own_assessor)
    return assessor(arguments, cwd, home) if assessor else None


def python_command(code: str) -> str:
    """The terminal command that runs `code` as `execute_code` does: what its approval judges
    and shows."""
    import shlex

    return f"python3 -c {shlex.quote(code)}"


def _assess_terminal(
    arguments: dict[str, Any], cwd: Path, home: Path, boundary: Boundary
) -> Assessment | None:
    """The floor is judged on every command, escalated or not. An escalated command crosses
    the boundary unless the user chose `full-access`; otherwise it runs where the sandbox
    (or its absence) puts it."""
    from talaria.policy.command_safety import assess_command

    command = arguments.get("command")
    if not isinstance(command, str):
        return None
    escalate = bool(arguments.get("escalate"))
    if escalate and not boundary.full_access:
        verdict = assess_command(command, cwd=cwd, home=home, sandboxed=True)
        return _escalated(command, verdict, arguments)
    sandboxed = boundary.sandboxed and not escalate
    return assess_command(command, cwd=cwd, home=home, sandboxed=sandboxed)


def _escalated(command: str, verdict: Assessment | None, arguments: dict[str, Any]) -> Assessment:
    """Running outside the sandbox is a decision for the user, whatever the command: the
    request names the justification and the command's own dangers, and is remembered apart
    from the same command run inside the sandbox (a grant for one never covers the other).
    Approvals off do not make that decision: only an answer does."""
    if verdict is not None and verdict.blocked:
        return verdict
    why = str(arguments.get("justification") or "").strip() or "no justification given"
    reason = f"runs outside the sandbox ({why})"
    pattern = "outside sandbox"
    if verdict is not None:
        reason, pattern = f"{reason}; {verdict.reason}", f"{pattern} + {verdict.pattern}"
    return Assessment(
        command=f"{ESCALATED} {command}", reason=reason, pattern=pattern, needs_a_human=True
    )


def _assess_read(arguments: dict[str, Any], cwd: Path, home: Path) -> Assessment | None:
    """read_file, or search_files pointed at one file: reading a secret asks."""
    from talaria.policy.secret_files import assess_secret_read
    from talaria.policy.sensitive_paths import resolve_path

    path = arguments.get("path", ".")
    return assess_secret_read(resolve_path(path, cwd), home) if isinstance(path, str) else None


_ASSESSORS: dict[str, Assessor] = {
    "read_file": _assess_read,
    "search_files": _assess_read,
}
