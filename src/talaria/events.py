"""Typed events: the protocol between the engine and every UI (CLI, ACP, HTTP).

The engine emits these and nothing else; the seed's callbacks are adapters over them
(`talaria.callbacks`). Events carry data only, no behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar


class _Event:
    """What `dataclass` would write into every event class, written once: its `exec` of
    generated code is most of the cost of creating a class on Python 3.11, and sixteen
    frozen events paid it six times each at `import talaria`. Equality, hashing and the repr
    are the generated ones', field by field; `__init__` and the frozen `__setattr__` are still
    generated (the loop builds events at every step)."""

    __slots__ = ()

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__dataclass_fields__)
        return f"{type(self).__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(
            getattr(self, name) == getattr(other, name) for name in self.__dataclass_fields__
        )

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, name) for name in self.__dataclass_fields__))

    __dataclass_fields__: ClassVar[dict[str, Any]]


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # see _Event
class TurnStarted(_Event):
    """A turn began: the user's message is in the session."""

    task_id: str
    session_id: str
    user_message: str


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # see _Event
class StatusChanged(_Event):
    """thinking | streaming | executing_tools | compressing | retrying | fallback | idle"""

    status: str
    detail: str = ""


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # see _Event
class ThinkingStarted(_Event):
    """A model call of the turn began (iteration counts from 1)."""

    iteration: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # see _Event
class ThinkingStopped(_Event):
    """That model call's answer is complete."""

    iteration: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # see _Event
class TextDelta(_Event):
    """A piece of the answer as it streams in."""

    text: str


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # see _Event
class ReasoningDelta(_Event):
    """A piece of the model's visible reasoning as it streams in."""

    text: str


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # see _Event
class ToolCallGenerated(_Event):
    """A tool call was parsed from the model's output (its arguments may still be arriving)."""

    index: int
    call_id: str
    name: str


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # see _Event
class ToolStarted(_Event):
    """A tool call is about to run, with the arguments it runs with."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    phase: str = "start"


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # see _Event
class ToolFinished(_Event):
    """A tool call ended; `result` is what the model will read."""

    call_id: str
    name: str
    result: str
    is_error: bool
    duration_s: float
    phase: str = "end"


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # see _Event
class ApprovalRequested(_Event):
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


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # see _Event
class ClarifyRequested(_Event):
    """The model asks the user a question. Answer with `agent.respond(request_id, text)`."""

    request_id: str
    call_id: str
    question: str
    choices: list[str] | None
    kind: str = "clarify"


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # see _Event
class RequestResolved(_Event):
    """A pending request got its answer (from any front end)."""

    request_id: str
    kind: str
    answer: str


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # see _Event
class RequestWithdrawn(_Event):
    """A pending request lapsed without an answer; every front end clears its prompt.
    reason: timeout | interrupted | turn_ended."""

    request_id: str
    kind: str
    reason: str


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # see _Event
class StepFinished(_Event):
    """One model call and the tools it asked for are done."""

    iteration: int
    api_calls: int
    tool_names: list[str] = field(default_factory=list)
    text: str | None = None


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # see _Event
class Notice(_Event):
    """Something the user should know that is not part of the answer (a retry, a fallback,
    a repaired history, a refused memory write)."""

    level: str
    message: str


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # see _Event
class TurnFinished(_Event):
    """The turn ended; `exit_reason` says how (text_response, interrupted, failed:..., ...)."""

    exit_reason: str
    final_response: str | None
    api_calls: int


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
    | TurnFinished
)

EventSink = Callable[[Event], None]
