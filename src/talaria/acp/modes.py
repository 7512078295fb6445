"""Session modes (`session/set_mode`): how much the agent may do without asking.

ask: every command and write the policy flags asks the user (`approvals.mode: manual`);
accept-edits: file writes (`write_file`, `patch`) run without asking, commands still ask;
yolo: nothing asks (`approvals.mode: off`); the hard floor still refuses in every mode, and
what would run outside the sandbox (an escalation) is refused, not asked.

The sandbox is a second, independent choice, so it is a session config option (`sandbox`:
read-only | workspace-write | full-access, `session/set_config_option`), not a mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from acp.schema import (
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
)

from talaria.acp.describe import EDIT_TOOLS
from talaria.policy.approval import ApprovalState
from talaria.tools.sandbox import SANDBOX_MODES

ASK, ACCEPT_EDITS, YOLO = "ask", "accept-edits", "yolo"

MODES = (
    SessionMode(id=ASK, name="Ask", description="Ask before commands and writes the policy flags"),
    SessionMode(
        id=ACCEPT_EDITS,
        name="Accept edits",
        description="Edit files without asking; still ask before commands",
    ),
    SessionMode(
        id=YOLO,
        name="Yolo",
        description="Never ask (the hard floor still refuses rm -rf /, mkfs, ...)",
    ),
)
MODE_IDS = tuple(mode.id for mode in MODES)


@dataclass
class ModeSwitch:
    """One session's mode: sets the agent's approval mode, and pre-approves edits through
    a `pre_tool_call` hook (the agent's own plugin seam) in accept-edits."""

    current: str = ASK
    approvals: ApprovalState | None = None

    def attach(self, approvals: ApprovalState) -> None:
        """Follow this agent's approvals; its configured mode decides the starting mode."""
        self.approvals = approvals
        self.current = YOLO if approvals.mode == "off" else ASK

    def set(self, mode_id: str) -> None:
        if mode_id not in MODE_IDS:
            raise ValueError(f"unknown mode {mode_id!r}; modes: {', '.join(MODE_IDS)}")
        self.current = mode_id
        if self.approvals is not None:
            self.approvals.mode = "off" if mode_id == YOLO else "manual"

    def state(self) -> SessionModeState:
        return SessionModeState(current_mode_id=self.current, available_modes=list(MODES))

    def register(self, bus: Any) -> None:
        """The plugin: `Agent(plugins=[switch])` calls this with the agent's hook bus."""
        bus.register("pre_tool_call", self._pre_tool_call)

    def _pre_tool_call(self, tool_name: str, **_: Any) -> dict[str, Any] | None:
        if self.current == ACCEPT_EDITS and tool_name in EDIT_TOOLS:
            return {"approve": True}
        return None


SANDBOX_OPTION = "sandbox"
SANDBOX_CHOICES = {
    "read-only": "Commands write nothing but a private /tmp",
    "workspace-write": "Commands write only the working directory (and sandbox.writable_roots)",
    "full-access": "Commands run without a sandbox",
}


def sandbox_option(current: str) -> SessionConfigOptionSelect:
    return SessionConfigOptionSelect(
        id=SANDBOX_OPTION,
        name="Sandbox",
        description="Where terminal commands may write (bubblewrap)",
        type="select",
        current_value=current,
        options=[
            SessionConfigSelectOption(value=mode, name=mode, description=SANDBOX_CHOICES[mode])
            for mode in SANDBOX_MODES
        ],
    )
