"""What `run_conversation` returns, and how a turn ended.

`TurnResult` is the hermes-shaped dict the loop has always returned, typed; `turn_exit_reason`
stays a string on the wire (``failed:rate_limit``, ``halted:approval timed out``), and the
helpers below read it, so no call site splits it itself.
"""

from typing import Literal, NotRequired, TypeAlias, TypedDict, get_args

from talaria.core.messages import Message


class UsageDict(TypedDict):
    """`Usage` as the turn result and the stores carry it."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int
    total_tokens: int
    estimated_cost_usd: float | None


ExitReason: TypeAlias = Literal[
    "running",
    "text_response",
    "max_iterations_reached",
    "budget_exceeded",
    "loop_detected",
    "interrupted",
    "failed",
    "halted",
]
"""How a turn ended, without its detail: ``failed:<class>`` reads as "failed" and
``halted:<why>`` as "halted". A reason this release does not know reads as "failed"."""

_KINDS: dict[str, ExitReason] = {kind: kind for kind in get_args(ExitReason)}


class TurnResult(TypedDict):
    """The result of one turn (the keys `run_conversation` has always returned)."""

    final_response: str | None
    messages: list[Message]
    completed: bool
    interrupted: bool
    failed: bool
    api_calls: int
    turn_exit_reason: str
    """An `ExitReason`, with ``:<detail>`` after "failed" and "halted"."""
    session_id: str
    task_id: str
    model: str
    provider: str
    api_mode: str
    usage: UsageDict
    error: NotRequired[str | None]
    """Why the turn failed (only when it did)."""
    interrupt_message: NotRequired[str]
    """The message that interrupted the turn, when one did."""


def failed(failure_class: str) -> str:
    """The exit reason of a turn that failed with `failure_class` (rate_limit, store, ...)."""
    return f"failed:{failure_class}"


def halted(why: str) -> str:
    """The exit reason of a turn a tool or hook stopped, saying why."""
    return f"halted:{why}"


def exit_reason(turn_exit_reason: str) -> ExitReason:
    """The kind of ending, without its detail."""
    return _KINDS.get(turn_exit_reason.partition(":")[0], "failed")


def failure_class(turn_exit_reason: str) -> str | None:
    """``rate_limit`` for ``failed:rate_limit``; None when the turn did not fail."""
    if exit_reason(turn_exit_reason) != "failed":
        return None
    kind, _, detail = turn_exit_reason.partition(":")
    return detail or kind


def halt_reason(turn_exit_reason: str) -> str | None:
    """Why a halted turn stopped (``approval timed out``); None when it did not halt."""
    kind, _, detail = turn_exit_reason.partition(":")
    return detail if kind == "halted" else None
