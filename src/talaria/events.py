"""Typed events: the protocol between the engine and every UI (CLI, ACP, HTTP).

The engine emits these and nothing else; the constructor's callbacks are adapters over them
(`talaria.callbacks`). Events carry data only, no behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class TurnStarted:
    """A turn began: the user's message is in the session."""

    task_id: str
    session_id: str
    user_message: str


@dataclass(frozen=True, slots=True)
class StatusChanged:
    """thinking | streaming | executing_tools | compressing | retrying | fallback | idle"""

    status: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ThinkingStarted:
    """A model call of the turn began (iteration counts from 1)."""

    iteration: int


@dataclass(frozen=True, slots=True)
class ThinkingStopped:
    """That model call's answer is complete."""

    iteration: int


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer as it streams in."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's visible reasoning as it streams in."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallGenerated:
    """A tool call was parsed from the model's output (its arguments may still be arriving)."""

    index: int
    call_id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A tool call is about to run, with the arguments it runs with."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    phase: str = "start"


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A tool call ended; `result` is what the model will read."""

    call_id: str
    name: str
    result: str
    is_error: bool
    duration_s: float
    phase: str = "end"


@dataclass(frozen=True, slots=True)
class SubagentOrigin:
    """Which `delegate_task` sub-agent something comes from: the parent's call that started
    it, the definition it runs (`agent`, "" for an inline one), its place in that call's
    tasks and its goal."""

    parent_call_id: str
    agent: str
    task_index: int
    task: str


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """A tool call needs a human's yes. Answer with `agent.respond(request_id, decision)`,
    decision one of `choices`; a `session`/`always` grant remembers `pattern` (the exact command
    or path the user was shown, never a whole class of commands)."""

    request_id: str
    call_id: str
    tool_name: str
    command: str
    reason: str
    arguments: dict[str, Any]
    pattern: str
    choices: tuple[str, ...] = ("once", "session", "always", "deny")
    kind: str = "approval"
    subagent: SubagentOrigin | None = None
    """Set when a sub-agent asks: the answer goes to it, through this agent's `respond`."""


@dataclass(frozen=True, slots=True)
class ClarifyRequested:
    """The model asks the user a question. Answer with `agent.respond(request_id, text)`."""

    request_id: str
    call_id: str
    question: str
    choices: list[str] | None
    kind: str = "clarify"
    subagent: SubagentOrigin | None = None
    """Set when a sub-agent asks (see `ApprovalRequested.subagent`)."""


@dataclass(frozen=True, slots=True)
class RequestResolved:
    """A pending request got its answer (from any front end)."""

    request_id: str
    kind: str
    answer: str


@dataclass(frozen=True, slots=True)
class RequestWithdrawn:
    """A pending request lapsed without an answer; every front end clears its prompt.
    reason: timeout | interrupted | turn_ended."""

    request_id: str
    kind: str
    reason: str


@dataclass(frozen=True, slots=True)
class StepFinished:
    """One model call and the tools it asked for are done."""

    iteration: int
    api_calls: int
    tool_names: list[str] = field(default_factory=list)
    text: str | None = None


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the user should know that is not part of the answer (a retry, a fallback,
    a repaired history, a refused memory write)."""

    level: str
    message: str


@dataclass(frozen=True, slots=True)
class SessionContinued:
    """The conversation continues in session `session_id` (compression started a child of
    `previous_id`, which keeps the full history). What belongs to the session (its id in the
    agent's tools, its background processes, pending memory) follows it."""

    previous_id: str
    session_id: str


@dataclass(frozen=True, slots=True)
class TurnFinished:
    """The turn ended; `exit_reason` says how (text_response, interrupted, failed:..., ...)."""

    exit_reason: str
    final_response: str | None
    api_calls: int


@dataclass(frozen=True, slots=True)
class SteerAccepted:
    """A steer reached the running turn: it goes to the model with the turn's next call."""

    steer_id: str
    text: str
    task_id: str


@dataclass(frozen=True, slots=True)
class SteerDelivered:
    """Steers were added to the conversation (after the tool results) for model call
    `iteration` of turn `task_id`."""

    steer_ids: list[str]
    iteration: int
    task_id: str


@dataclass(frozen=True, slots=True)
class MessageQueued:
    """A message waits to run as a turn of its own (`position` counts from 1);
    `from_steer`: a steer that came after the turn's last model call, or between turns."""

    message_id: str
    text: str
    position: int
    from_steer: bool = False


@dataclass(frozen=True, slots=True)
class QueuedMessageStarted:
    """A queued message's turn begins (its TurnStarted follows)."""

    message_id: str
    text: str
    task_id: str


@dataclass(frozen=True, slots=True)
class SubagentEvent:
    """An event of a `delegate_task` sub-agent (its text, tool calls, turn start and end),
    nested under the parent's call `origin.parent_call_id`. Its approval and clarify
    requests are not wrapped: they are this agent's own requests, naming the sub-agent."""

    origin: SubagentOrigin
    event: Event


Event = (
    TurnStarted
    | StatusChanged
    | ThinkingStarted
    | ThinkingStopped
    | TextDelta
    | ReasoningDelta
    | ToolCallGenerated
    | ToolStarted
    | ToolFinished
    | ApprovalRequested
    | ClarifyRequested
    | RequestResolved
    | RequestWithdrawn
    | StepFinished
    | Notice
    | SessionContinued
    | TurnFinished
    | SteerAccepted
    | SteerDelivered
    | MessageQueued
    | QueuedMessageStarted
    | SubagentEvent
)

EventSink = Callable[[Event], None]
