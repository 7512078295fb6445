"""The telemetry seam and its default, which records nothing.

Every method returns a context manager yielding a `Scope`; the code being observed reports
what happened through the scope's methods (a failed attempt, the answer, a tool's result) and
the context manager closes the span, marking it failed when an exception escapes. The base
classes are complete no-ops, so the observed code never checks whether telemetry is on.
`talaria.telemetry` chooses and implements the recording one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from talaria.core.model import ModelRequest, ModelResponse, Usage


class Scope:
    """What an observed operation reports while it runs; every method is optional."""

    def attempt_failed(self, error: Exception, next_step: str, target: Any = None) -> None:
        """A model request failed (a `ProviderError`); `next_step` is retry | fallback (to
        `target`) | raise."""

    def answered(self, client: Any, response: ModelResponse) -> None:
        """The model call produced `response` through `client` (the entry that answered)."""

    def tool_done(self, arguments: dict[str, Any], content: str, is_error: bool) -> None:
        """A tool call finished with `content` (an error result when `is_error`)."""

    def decided(self, decision: str) -> None:
        """An approval wait ended with `decision` (once | session | always | deny | timeout)."""

    def compressed(self, before: int, after: int, session_id: str) -> None:
        """A compression turned `before` messages into `after`, continuing in `session_id`."""

    def turn_done(
        self,
        exit_reason: str,
        usage: Usage,
        api_calls: int,
        final_response: str | None,
        model: str = "",
        provider: str = "",
    ) -> None:
        """A turn ended: why, what it spent, and the model that answered last."""


NULL_SCOPE = Scope()


@dataclass(frozen=True, slots=True)
class TurnStart:
    """What a turn is recorded under: who runs it, where, on which model, asked what."""

    agent_name: str
    session_id: str
    task_id: str
    model: str
    provider: str
    user_message: str
    start_time: int | None = None
    """When it began (ns since the epoch), if before it is recorded: a durable turn is
    recorded on the worker when it ends."""


class Telemetry:
    """Records nothing. `talaria.telemetry.otel.OtelTelemetry` records spans and metrics."""

    enabled = False
    capture_content = False

    @contextmanager
    def turn(self, start: TurnStart) -> Iterator[Scope]:
        """One turn, from `start`."""
        yield NULL_SCOPE

    @contextmanager
    def model_call(self, request: ModelRequest, target: Any) -> Iterator[Scope]:
        """One model call as the loop sees it (retries and fallbacks inside); `target` has
        `model`, `provider` and `api_mode` (a chain entry or a client)."""
        yield NULL_SCOPE

    @contextmanager
    def tool_call(self, name: str, call_id: str) -> Iterator[Scope]:
        yield NULL_SCOPE

    @contextmanager
    def approval(self, tool_name: str, command: str) -> Iterator[Scope]:
        yield NULL_SCOPE

    @contextmanager
    def compression(self, session_id: str) -> Iterator[Scope]:
        yield NULL_SCOPE


NO_TELEMETRY = Telemetry()
