"""The telemetry seam and its default, which records nothing.

Every method returns a context manager yielding a `Scope`; the code being observed reports
what happened through the scope's methods (a failed attempt, the answer, a tool's result) and
the context manager closes the span, marking it failed when an exception escapes. The base
classes are complete no-ops, so the observed code never checks whether telemetry is on.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from talaria.config import Config
    from talaria.providers.base import ModelRequest, ModelResponse, Usage
    from talaria.providers.errors import ProviderError


class Scope:
    """What an observed operation reports while it runs; every method is optional."""

    def attempt_failed(self, error: ProviderError, next_step: str, target: Any = None) -> None:
        """A model request failed; `next_step` is retry | fallback (to `target`) | raise."""

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


class Telemetry:
    """Records nothing. `talaria.telemetry.otel.OtelTelemetry` records spans and metrics."""

    enabled = False
    capture_content = False

    @contextmanager
    def turn(
        self,
        *,
        agent_name: str,
        session_id: str,
        task_id: str,
        model: str,
        provider: str,
        user_message: str,
        start_time: int | None = None,
    ) -> Iterator[Scope]:
        """One turn; `start_time` (ns since the epoch) when it began before this call (a
        durable turn is recorded when it ends)."""
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

ACTIVE: contextvars.ContextVar[Telemetry | None] = contextvars.ContextVar(
    "talaria_telemetry", default=None
)
"""The telemetry of the turn running in this context: a child agent started from one of its
tools records into the same traces, whatever its own configuration says."""


def telemetry_enabled(config: Config, env: dict[str, str] | None = None) -> bool:
    """`telemetry.enabled` (`TALARIA_OTEL=1` sets it); `OTEL_SDK_DISABLED=true` wins."""
    environ = os.environ if env is None else env
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(config.get("telemetry.enabled", False))


def telemetry_for(config: Config) -> Telemetry:
    """The telemetry an agent with this configuration records into (imports OpenTelemetry
    only when it is on)."""
    inherited = ACTIVE.get()
    if inherited is not None:
        return inherited
    if not telemetry_enabled(config):
        return NO_TELEMETRY
    from talaria.telemetry.otel import OtelTelemetry

    return OtelTelemetry.from_config(config)
