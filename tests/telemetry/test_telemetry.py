"""OpenTelemetry traces and metrics of real turns against the scripted provider (all three wire
APIs): the GenAI span tree, attributes, retries and fallbacks as events, child agents in the
parent's trace, content only on request, and nothing imported when telemetry is off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from helpers import MODES, base_url, scripted_agent
from otlp_collector import Collector
from talaria.testing import Fail, ScriptedProvider, call, calls, text

SECRET = "the-launch-code-is-4242"
FAST = {"retry.base_delay": 0.01, "retry.max_delay": 0.05, "telemetry.enabled": True}
USAGE = {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 50}

_exporter = InMemorySpanExporter()
_reader = InMemoryMetricReader()


@pytest.fixture(scope="module", autouse=True)
def user_providers() -> None:
    """The test plays a program that set up OpenTelemetry itself: talaria must use its providers
    (set once per process, as the API allows)."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_exporter))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[_reader]))


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    _exporter.clear()
    yield _exporter
    _exporter.clear()


@pytest.fixture
def backup() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(model="backup-model") as server:
        yield server


def by_name(finished: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in finished}


def children(parent: ReadableSpan, finished: Any) -> list[ReadableSpan]:
    assert parent.context is not None
    kids = [s for s in finished if s.parent and s.parent.span_id == parent.context.span_id]
    return sorted(kids, key=lambda s: s.start_time or 0)


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_loop_with_a_retry_and_a_fallback_is_one_trace(
    provider: ScriptedProvider,
    backup: ScriptedProvider,
    spans: InMemorySpanExporter,
    tmp_path: Path,
    mode: str,
) -> None:
    provider.add(Fail(503), call("add", {"a": 2, "b": 40}, usage=USAGE))
    provider.add(Fail(500), Fail(500), Fail(500))
    backup.add(text("42", usage=USAGE))
    fallback = {"model": "backup-model", "base_url": base_url(backup, mode), "api_key": "k",
                "api_mode": mode}  # fmt: skip
    with scripted_agent(
        provider, tmp_path, mode, config=FAST, fallback_providers=[fallback]
    ) as agent:
        result = agent.run_conversation("What is 2 + 40?")
    assert result["final_response"] == "42"

    finished = spans.get_finished_spans()
    turn = by_name(finished)["invoke_agent talaria"]
    tree = [(s.name, s.kind) for s in children(turn, finished)]
    assert tree == [
        ("chat scripted-model", SpanKind.CLIENT),
        ("execute_tool add", SpanKind.INTERNAL),
        ("chat backup-model", SpanKind.CLIENT),
    ]
    first, tool, last = children(turn, finished)
    attrs = turn.attributes or {}
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.conversation.id"] == result["session_id"]
    assert attrs["talaria.turn_exit_reason"] == "text_response"
    assert attrs["talaria.usage.input_tokens"] == 200  # disjoint: cache reads apart
    assert attrs["gen_ai.usage.input_tokens"] == 300  # the conventions count them in
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 100
    assert attrs["talaria.api_calls"] == 6

    call_attrs = first.attributes or {}
    assert call_attrs["gen_ai.operation.name"] == "chat"
    assert call_attrs["gen_ai.request.model"] == "scripted-model"
    assert call_attrs["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert call_attrs["talaria.api_mode"] == mode
    assert call_attrs["talaria.usage.output_tokens"] == 20
    assert call_attrs["server.address"] == "127.0.0.1"
    assert [(e.name, (e.attributes or {})["error.type"]) for e in first.events] == [
        ("gen_ai.retry", "server_error")
    ]

    assert (tool.attributes or {})["gen_ai.tool.name"] == "add"
    assert (tool.attributes or {})["gen_ai.tool.call.id"]
    assert tool.status.status_code is not StatusCode.ERROR

    assert [e.name for e in last.events] == ["gen_ai.retry", "gen_ai.retry", "gen_ai.fallback"]
    fell_back = last.events[-1].attributes or {}
    assert fell_back["talaria.fallback.model"] == "backup-model"
    assert (last.attributes or {})["gen_ai.request.model"] == "backup-model"
    assert (last.attributes or {})["talaria.attempts"] == 4


def test_content_is_recorded_only_when_capture_is_on(
    provider: ScriptedProvider, spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    def turn(capture: bool) -> str:
        spans.clear()
        provider.add(call("add", {"a": 4242, "b": 1}), text(f"done: {SECRET}"))
        config = {**FAST, "telemetry.capture_content": capture}
        with scripted_agent(provider, tmp_path / str(capture), config=config) as agent:
            agent.chat(f"Please add; {SECRET}")
        # ids (session, task, response) hold digits of the clock: left out of the search
        found = [
            {k: v for k, v in (s.attributes or {}).items() if not k.endswith("id")}
            for s in spans.get_finished_spans()
        ]
        return json.dumps(found, default=str)

    assert SECRET not in turn(capture=False)
    assert "4242" not in turn(capture=False)
    recorded = turn(capture=True)
    assert SECRET in recorded
    assert '\\"a\\": 4242' in recorded  # the tool's arguments
    named = by_name(spans.get_finished_spans())
    tool = named["execute_tool add"].attributes or {}
    assert tool["gen_ai.tool.call.result"] == "4243"
    chat = named["chat scripted-model"].attributes or {}
    assert json.loads(str(chat["gen_ai.system_instructions"]))[0]["type"] == "text"


def test_a_failed_turn_and_a_failed_tool_are_marked_as_errors(
    provider: ScriptedProvider, spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    provider.add(call("add", {"a": "not a number", "b": 1}), Fail(400, message="bad request"))
    with scripted_agent(provider, tmp_path, config=FAST) as agent:
        result = agent.run_conversation("add")
    assert result["failed"]
    named = by_name(spans.get_finished_spans())
    assert named["execute_tool add"].status.status_code is StatusCode.ERROR
    assert (named["execute_tool add"].attributes or {})["error.type"] == "tool_error"
    assert named["chat scripted-model"].status.status_code is StatusCode.ERROR
    turn = named["invoke_agent talaria"]
    assert turn.status.status_code is StatusCode.ERROR
    assert (turn.attributes or {})["talaria.turn_exit_reason"] == result["turn_exit_reason"]


def test_child_agents_are_spans_under_the_parents_tool_call(
    provider: ScriptedProvider, spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    def answer(body: dict[str, Any]) -> Any:
        return text("child report" if "focused sub-agent" in json.dumps(body) else "all done")

    provider.add(calls(("delegate_task", {"goal": "look around"})), answer, answer)
    with scripted_agent(provider, tmp_path, config=FAST, toolsets=["delegation"]) as agent:
        assert agent.chat("delegate it") == "all done"
    finished = spans.get_finished_spans()
    delegate = by_name(finished)["execute_tool delegate_task"]
    (child,) = children(delegate, finished)
    assert child.name == "invoke_agent talaria"
    assert child.context is not None and delegate.context is not None
    assert child.context.trace_id == delegate.context.trace_id
    assert [s.name for s in children(child, finished)] == ["chat scripted-model"]


def test_approval_waits_and_compressions_are_spans(
    provider: ScriptedProvider, spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    build = tmp_path / "build"
    build.mkdir()
    provider.add(calls(("terminal", {"command": f"rm -rf {build}"})), text("deleted"))
    provider.add(text("nothing else"), text("## Goal\nDelete the build directory."))
    config = {**FAST, "context.engine": "default", "compression.protect_last_n": 2}
    with scripted_agent(
        provider, tmp_path, config=config, toolsets=["terminal"], tools=[],
        approval_callback=lambda request: "once",
    ) as agent:  # fmt: skip
        agent.chat("delete the build directory")
        agent.chat("anything else?")
        assert agent.compress()
    assert not build.exists()
    finished = spans.get_finished_spans()
    named = by_name(finished)
    approval = named["approval terminal"]
    assert children(named["execute_tool terminal"], finished) == [approval]
    assert (approval.attributes or {})["talaria.approval.decision"] == "approved"
    assert "talaria.approval.command" not in (approval.attributes or {})  # content: off
    compression = named["compress_context"]
    assert [s.name for s in children(compression, finished)] == ["chat scripted-model"]
    attrs = compression.attributes or {}
    before, after = (attrs[f"talaria.compression.messages_{k}"] for k in ("before", "after"))
    assert isinstance(before, int) and isinstance(after, int) and before > after
    assert attrs["talaria.compression.session_id"] == agent.session_id


def test_metrics_count_tokens_durations_and_tool_errors(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(
        calls(("add", {"a": 1, "b": 2}), ("add", {"a": "x", "b": 2}), usage=USAGE),
        text("3", usage=USAGE),
    )
    before = _points()
    with scripted_agent(provider, tmp_path, config=FAST) as agent:
        agent.chat("add twice")
    after = _points()
    input_key = ("gen_ai.client.token.usage", ("gen_ai.token.type", "input"))
    assert after[input_key] - before.get(input_key, 0) == 300  # two calls of 150
    duration_key = ("gen_ai.client.operation.duration", None)
    assert after[duration_key] - before.get(duration_key, 0) == 2  # two calls
    errors_key = ("talaria.tool.errors", ("gen_ai.tool.name", "add"))
    assert after[errors_key] - before.get(errors_key, 0) == 1


def _points() -> dict[tuple[str, Any], float]:
    """Histogram sums (token usage by type), counts (durations) and counter values."""
    found: dict[tuple[str, Any], float] = {}
    data = _reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    attrs = dict(point.attributes or {})
                    if metric.name == "gen_ai.client.token.usage":
                        key = ("gen_ai.token.type", attrs["gen_ai.token.type"])
                        value = point.sum  # type: ignore[union-attr]
                    elif metric.name == "gen_ai.client.operation.duration":
                        key, value = None, point.count  # type: ignore[union-attr]
                    elif metric.name == "talaria.tool.errors":
                        key = ("gen_ai.tool.name", attrs["gen_ai.tool.name"])
                        value = point.value  # type: ignore[union-attr]
                    else:
                        continue
                    found[(metric.name, key)] = found.get((metric.name, key), 0) + value
    return found


def test_with_telemetry_off_nothing_from_opentelemetry_is_imported(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(text("hi"))
    script = (
        "import sys\n"
        "from talaria import Agent\n"
        f"agent = Agent(model='m', base_url={provider.openai_base_url!r}, api_key='k',"
        f" home={str(tmp_path)!r}, toolsets=[])\n"
        "assert agent.chat('hi') == 'hi'\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TALARIA_OTEL"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_cli_turn_exports_over_otlp_http_to_a_collector(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(call("add", {"a": 1, "b": 2}, usage=USAGE), text("3", usage=USAGE))
    collector = Collector()
    env = {
        **os.environ,
        "TALARIA_OTEL": "1",
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
        "OTEL_SERVICE_NAME": "talaria-under-test",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    command = [sys.executable, "-m", "talaria.cli.main", "chat", "-q", "add 1 and 2",
               "--model", "scripted-model", "--base-url", provider.openai_base_url,
               "--api-key", "k", "--home", str(tmp_path), "--toolsets", ""]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    finally:
        collector.close()
    assert done.returncode == 0, done.stderr
    names = [span.name for span in collector.spans]
    assert sorted(names) == [
        "chat scripted-model",
        "chat scripted-model",
        "execute_tool add",  # an unknown tool here: the model reads the error and goes on
        "invoke_agent talaria",
    ]
    turn = next(s for s in collector.spans if s.name == "invoke_agent talaria")
    attrs = {a.key: a.value for a in turn.attributes}
    assert attrs["talaria.usage.input_tokens"].int_value == 200
    assert attrs["gen_ai.conversation.id"].string_value
    assert all(s.trace_id == turn.trace_id for s in collector.spans)
    assert collector.resources[0]["service.name"] == "talaria-under-test"
    assert {"gen_ai.client.token.usage", "gen_ai.client.operation.duration"} <= (
        collector.metric_names
    )
