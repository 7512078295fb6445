"""The OpenTelemetry telemetry: GenAI spans and metrics (semantic conventions, "Development").

Span tree of one turn::

    invoke_agent talaria                       gen_ai.conversation.id = session id
      chat gpt-4.1            (CLIENT)        failed attempts as events: retry, fallback
      execute_tool terminal
        approval terminal                      the wait for the user's answer
      execute_tool delegate_task
        invoke_agent talaria                   a child agent, in the same trace
      compress_context
        chat gpt-4.1-mini     (CLIENT)        the summary request

Usage is recorded twice on purpose: the conventions' `gen_ai.usage.*` (input tokens include
the cached ones, as the conventions define them) and talaria's disjoint buckets
(`talaria.usage.*`, the numbers `run_conversation` returns), plus `talaria.cost_usd`. Message
text, tool arguments and results are recorded only with `telemetry.capture_content: true`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from talaria.config import Config
from talaria.core import ModelRequest, ModelResponse, Usage, failure_class
from talaria.core.telemetry import Scope, Telemetry, TurnStart
from talaria.providers.errors import ProviderError
from talaria.telemetry import content
from talaria.telemetry.base import ACTIVE

TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48)
"""Bucket boundaries the GenAI conventions advise for these two histograms."""

_instances: dict[tuple[bool, int, int], OtelTelemetry] = {}


def error_type(exc: BaseException) -> str:
    if isinstance(exc, ProviderError):
        return exc.kind.value
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return "interrupted" if type(exc).__name__ == "Interrupted" else type(exc).__qualname__


def usage_attributes(usage: Usage) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
        "talaria.usage.input_tokens": usage.input_tokens,
        "talaria.usage.output_tokens": usage.output_tokens,
        "talaria.usage.cache_read_tokens": usage.cache_read_tokens,
        "talaria.usage.cache_write_tokens": usage.cache_write_tokens,
        "talaria.usage.reasoning_tokens": usage.reasoning_tokens,
        "talaria.usage.total_tokens": usage.total_tokens,
    }
    if usage.estimated_cost_usd is None:
        attributes["talaria.cost_known"] = False
    else:
        attributes["talaria.cost_usd"] = usage.estimated_cost_usd
    return attributes


def _fail(span: Span, kind: str, description: str) -> None:
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, description[:300]))


class OtelTelemetry(Telemetry):
    enabled = True

    def __init__(self, tracer: trace.Tracer, meter: metrics.Meter, capture_content: bool) -> None:
        self.tracer = tracer
        self.capture_content = capture_content
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens used per model call, by gen_ai.token.type (input | output)",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.operation_duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Duration of a model call, retries and fallbacks included",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.tool_duration = meter.create_histogram(
            "talaria.tool.duration", unit="s", description="Duration of a tool call, by tool"
        )
        self.tool_errors = meter.create_counter(
            "talaria.tool.errors", unit="{call}", description="Tool calls that ended in an error"
        )
        self.cost = meter.create_counter(
            "talaria.cost", unit="USD", description="Estimated cost of model calls, by model"
        )

    @classmethod
    def from_config(cls, config: Config) -> OtelTelemetry:
        """One instance per process and providers (instruments are registered once)."""
        from talaria import __version__
        from talaria.telemetry.export import ensure_providers

        ensure_providers()
        capture = bool(config.telemetry.capture_content)
        tracer_provider, meter_provider = trace.get_tracer_provider(), metrics.get_meter_provider()
        key = (capture, id(tracer_provider), id(meter_provider))
        if key not in _instances:
            _instances[key] = cls(
                tracer_provider.get_tracer("talaria", __version__),
                meter_provider.get_meter("talaria", __version__),
                capture,
            )
        return _instances[key]

    @contextmanager
    def _span(
        self,
        name: str,
        attributes: dict[str, Any],
        kind: SpanKind = SpanKind.INTERNAL,
        start_time: int | None = None,
    ) -> Iterator[Span]:
        """A current span that is marked failed (error.type) when an exception escapes."""
        with self.tracer.start_as_current_span(
            name,
            kind=kind,
            attributes=attributes,
            start_time=start_time,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as exc:
                _fail(span, error_type(exc), str(exc) or type(exc).__name__)
                raise

    @contextmanager
    def turn(self, start: TurnStart) -> Iterator[Scope]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": start.agent_name,
            "gen_ai.conversation.id": start.session_id,
            "gen_ai.provider.name": start.provider,
            "gen_ai.request.model": start.model,
            "talaria.task_id": start.task_id,
        }
        if self.capture_content:
            attributes["gen_ai.input.messages"] = content.user_turn(start.user_message)
        token = ACTIVE.set(self)
        try:
            name = f"invoke_agent {start.agent_name}"
            with self._span(name, attributes, start_time=start.start_time) as span:
                yield _TurnScope(self, span)
        finally:
            ACTIVE.reset(token)

    @contextmanager
    def model_call(self, request: ModelRequest, target: Any) -> Iterator[Scope]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": str(target.provider),
            "gen_ai.request.model": str(target.model),
            "talaria.api_mode": str(target.api_mode),
            "talaria.stream": request.stream,
        }
        if request.max_tokens:
            attributes["gen_ai.request.max_tokens"] = request.max_tokens
        if request.temperature is not None:
            attributes["gen_ai.request.temperature"] = request.temperature
        if self.capture_content:
            instructions, messages = content.input_messages(request.messages)
            attributes["gen_ai.input.messages"] = messages
            if instructions:
                attributes["gen_ai.system_instructions"] = instructions
            if request.tools:
                attributes["gen_ai.tool.definitions"] = content.dumps(request.tools)
        scope: _CallScope | None = None
        try:
            with self._span(f"chat {target.model}", attributes, SpanKind.CLIENT) as span:
                scope = _CallScope(self, span, target)
                yield scope
        except BaseException as exc:
            if scope is not None:
                scope.record_duration(error_type(exc))
            raise
        if scope is not None:
            scope.record_duration(None)

    @contextmanager
    def tool_call(self, name: str, call_id: str) -> Iterator[Scope]:
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        with self._span(f"execute_tool {name}", attributes) as span:
            yield _ToolScope(self, span, name)

    @contextmanager
    def approval(self, tool_name: str, command: str) -> Iterator[Scope]:
        attributes: dict[str, Any] = {"gen_ai.tool.name": tool_name}
        if self.capture_content:
            attributes["talaria.approval.command"] = command
        with self._span(f"approval {tool_name}", attributes) as span:
            yield _ApprovalScope(span)

    @contextmanager
    def compression(self, session_id: str) -> Iterator[Scope]:
        with self._span("compress_context", {"gen_ai.conversation.id": session_id}) as span:
            yield _CompressionScope(span)


class _TurnScope(Scope):
    def __init__(self, telemetry: OtelTelemetry, span: Span) -> None:
        self.telemetry = telemetry
        self.span = span

    def turn_done(
        self,
        exit_reason: str,
        usage: Usage,
        api_calls: int,
        final_response: str | None,
        model: str = "",
        provider: str = "",
    ) -> None:
        span = self.span
        span.set_attributes(usage_attributes(usage))
        span.set_attribute("talaria.turn_exit_reason", exit_reason)
        span.set_attribute("talaria.api_calls", api_calls)
        if model:
            span.set_attribute("gen_ai.response.model", model)
        if self.telemetry.capture_content and final_response is not None:
            span.set_attribute("gen_ai.output.messages", content.final_answer(final_response))
        failure = failure_class(exit_reason)
        if failure is not None:
            _fail(span, failure, exit_reason)


class _CallScope(Scope):
    def __init__(self, telemetry: OtelTelemetry, span: Span, target: Any) -> None:
        self.telemetry = telemetry
        self.span = span
        self.started = time.monotonic()
        self.metric_attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": str(target.provider),
            "gen_ai.request.model": str(target.model),
        }
        self.attempts = 0

    def attempt_failed(self, error: Exception, next_step: str, target: Any = None) -> None:
        self.attempts += 1
        event: dict[str, Any] = {
            "error.type": error_type(error),
            "talaria.attempt": self.attempts,
            "talaria.next_step": next_step,
        }
        if isinstance(error, ProviderError):
            event["gen_ai.provider.name"] = error.provider or ""
            event["gen_ai.request.model"] = error.model or ""
            if error.status:
                event["http.response.status_code"] = error.status
        if target is not None:
            event["talaria.fallback.provider"] = str(target.provider)
            event["talaria.fallback.model"] = str(target.model)
        self.span.add_event(
            f"gen_ai.{next_step}" if next_step != "raise" else "gen_ai.error", event
        )

    def answered(self, client: Any, response: ModelResponse) -> None:
        from talaria.providers.pricing import estimate_cost
        from talaria.providers.profiles import profile_of

        span = self.span
        usage = Usage.from_dict(response.usage.to_dict())
        usage.estimated_cost_usd = estimate_cost(
            client.model, usage, client.provider, profile_of(client)
        )
        requested = {
            "gen_ai.provider.name": str(client.provider),
            "gen_ai.request.model": str(client.model),
        }
        span.update_name(f"chat {client.model}")
        span.set_attributes(requested)
        span.set_attribute("talaria.api_mode", str(client.api_mode))
        span.set_attribute("gen_ai.response.model", response.model or str(client.model))
        span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
        span.set_attribute("talaria.attempts", self.attempts + 1)
        if response.response_id:
            span.set_attribute("gen_ai.response.id", response.response_id)
        span.set_attributes(_server(getattr(client, "base_url", "")))
        span.set_attributes(usage_attributes(usage))
        if self.telemetry.capture_content:
            span.set_attribute("gen_ai.output.messages", content.output_messages(response))
        self.metric_attributes.update(requested)
        self.metric_attributes["gen_ai.response.model"] = response.model or str(client.model)
        self._record_usage(usage)

    def _record_usage(self, usage: Usage) -> None:
        telemetry = self.telemetry
        for kind, count in (("input", usage.prompt_tokens), ("output", usage.output_tokens)):
            telemetry.token_usage.record(
                count, {**self.metric_attributes, "gen_ai.token.type": kind}
            )
        if usage.estimated_cost_usd:
            telemetry.cost.add(usage.estimated_cost_usd, self.metric_attributes)

    def record_duration(self, error: str | None) -> None:
        attributes = dict(self.metric_attributes)
        if error:
            attributes["error.type"] = error
        self.telemetry.operation_duration.record(time.monotonic() - self.started, attributes)


def _server(base_url: str) -> dict[str, Any]:
    parts = urlsplit(base_url or "")
    if not parts.hostname:
        return {}
    attributes: dict[str, Any] = {"server.address": parts.hostname}
    if parts.port:
        attributes["server.port"] = parts.port
    return attributes


class _ToolScope(Scope):
    def __init__(self, telemetry: OtelTelemetry, span: Span, name: str) -> None:
        self.telemetry = telemetry
        self.span = span
        self.name = name
        self.started = time.monotonic()

    def tool_done(self, arguments: dict[str, Any], content: str, is_error: bool) -> None:
        telemetry, span = self.telemetry, self.span
        if telemetry.capture_content:
            span.set_attribute("gen_ai.tool.call.arguments", json.dumps(arguments, default=str))
            span.set_attribute("gen_ai.tool.call.result", content)
        attributes = {"gen_ai.tool.name": self.name}
        if is_error:
            first_line = content.splitlines()[0] if content else ""
            _fail(span, "tool_error", first_line if telemetry.capture_content else "tool error")
            telemetry.tool_errors.add(1, attributes)
            attributes = {**attributes, "error.type": "tool_error"}
        telemetry.tool_duration.record(time.monotonic() - self.started, attributes)


class _ApprovalScope(Scope):
    def __init__(self, span: Span) -> None:
        self.span = span

    def decided(self, decision: str) -> None:
        self.span.set_attribute("talaria.approval.decision", decision)


class _CompressionScope(Scope):
    def __init__(self, span: Span) -> None:
        self.span = span

    def compressed(self, before: int, after: int, session_id: str) -> None:
        self.span.set_attributes(
            {
                "talaria.compression.messages_before": before,
                "talaria.compression.messages_after": after,
                "talaria.compression.session_id": session_id,
            }
        )
