"""The approval path of one tool call, shared by the executor and the tool itself.

The executor asks here before it runs a call the policy judged (`talaria.policy.approval`);
the running tool gets the same object as `ToolContext.approver` to ask about what it is about
to do itself (a sub-agent's commands, code that calls tools). Either way the question is one
`ApprovalRequested` event answered through `Agent.respond` (docs/architecture.md, "One engine,
many front ends"), and no one to ask means no (the fail-closed invariant).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from talaria.events import ApprovalRequested
from talaria.interaction import Interactions, RequestLapsed

if TYPE_CHECKING:
    from talaria.core import ApprovalVerdict
    from talaria.policy.approval import ApprovalState


@dataclass(frozen=True, slots=True)
class CallApprover:
    """A `talaria.core.ToolApprover` bound to one tool call of one agent."""

    approvals: ApprovalState
    interactions: Interactions
    timeout: float
    call_id: str
    tool_name: str
    arguments: Mapping[str, Any]

    async def ask(
        self,
        command: str,
        reason: str,
        *,
        tool_name: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        needs_a_human: bool = False,
    ) -> ApprovalVerdict:
        if self.approvals.is_granted(command):
            return "approved"
        if self.approvals.mode == "off":
            return "unattended" if needs_a_human else "approved"
        if not self.interactions.can_answer("approval"):
            return "no_one"
        shown = dict(self.arguments if arguments is None else arguments)

        name = tool_name or self.tool_name

        def request(request_id: str) -> ApprovalRequested:
            return ApprovalRequested(
                request_id, self.call_id, name, command, reason, shown, command
            )

        try:
            decision = await self.interactions.ask(request, self.timeout)
        except RequestLapsed:
            return "timed_out"
        if decision == "deny":
            return "denied"
        self.approvals.record(decision, command)
        return "approved"
