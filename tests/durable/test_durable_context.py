"""What a durable turn shares with a normal one, on a real Temporal dev server with real
`talaria worker` processes: compression when the history outgrows the window (the summary on
a worker, the hand-over to a child session done once, even when a replacement worker replays
the turn), and the turn's `invoke_agent` span with a normal turn's attributes."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from otlp_collector import Collector
from talaria.durable.client import connect, start_turn
from talaria.messages.validate import history_problems
from talaria.store.sqlite import SQLiteSessionStore
from talaria.testing import ScriptedProvider, call, text
from temporal_cluster import WorkerProcess, wait_for, worker_home

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(300)]

SMALL_WINDOW = "compression:\n  protect_last_n: 2\n"
"""With `model.context_length: 8000` (below): past 4000 tokens the middle is summarised."""


def small_window_home(path: Path) -> Path:
    home = worker_home(path, context_length=8000)
    with (home / "config.yaml").open("a") as config:
        config.write(SMALL_WINDOW)
    return home


def summary_requests(server: ScriptedProvider) -> list[Any]:
    """The compression's requests: the only ones sent without tools."""
    return [r for r in server.requests if "tools" not in r.body]


async def test_a_long_durable_turn_compresses_once_even_when_replayed(
    temporal_target: str, tmp_path: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    home = small_window_home(tmp_path / "home")
    small, large = {"input_tokens": 100, "output_tokens": 5}, {"input_tokens": 6000}
    script = [
        call("append_line", {"text": "one"}, usage=small),
        text("Line one is in.", usage=small),
        call("append_line", {"text": "two"}, usage={**large, "output_tokens": 5}),
        text("The user had line one appended.", usage={"input_tokens": 300, "output_tokens": 9}),
        text("lost with the worker", delay=60),
        text("both lines are in"),
    ]
    with ScriptedProvider(script) as server:
        first = WorkerProcess(temporal_target, queue, server, home)
        workers.append(first)
        client = await connect(temporal_target)
        earlier = await (await start_turn(client, queue, "append line one")).result()
        seen: list[dict[str, Any]] = []
        turn = await start_turn(client, queue, "append line two", session=earlier["session_id"])
        following = asyncio.ensure_future(turn.follow(seen.append))
        await wait_for(lambda: len(server.requests) == 5, "the call after the compression")
        first.kill9()  # the next worker replays the turn, compression included
        workers.append(WorkerProcess(temporal_target, queue, server, home))
        result = await following
        assert server.invalid_requests == []
        assert len(server.requests) == 6  # only the lost call was asked again
        (summary,) = summary_requests(server)
    assert "Line one is in." in str(summary.body["messages"])
    assert result["final_response"] == "both lines are in"
    messages = result["messages"]
    assert messages[0] == {"role": "user", "content": "append line one"}
    assert "The user had line one appended." in str(messages[1]["content"])  # the summary
    assert messages[2] == {"role": "user", "content": "append line two"}
    assert [m["role"] for m in messages[3:]] == ["assistant", "tool", "assistant"]
    assert history_problems(messages) == []
    after_summary = str(server.requests[-1].body["messages"])
    assert "The user had line one appended." in after_summary
    assert "Line one is in." not in after_summary
    with SQLiteSessionStore(home / "state.db") as store:
        parent = store.get_session(earlier["session_id"])
        children = [s for s in store.list_sessions(limit=10) if s.parent_session_id]
        assert parent is not None and parent.end_reason == "compressed"
        assert [(c.id, c.parent_session_id) for c in children] == [
            (result["session_id"], parent.id)
        ]
        assert store.load_messages(result["session_id"]) == messages
        assert len(store.load_messages(parent.id)) == 7  # all of it until the compression
        child = children[0]
        assert child.usage["total_tokens"] == result["usage"]["total_tokens"]
    notices = [e["message"] for e in seen if e["type"] == "Notice"]
    assert any(f"continuing in session {child.id}" in n for n in notices), notices
    assert result["usage"]["input_tokens"] >= 6000 + 300  # the summary counts in the turn


def span_attributes(span: Any) -> dict[str, Any]:
    values = {}
    for attribute in span.attributes:
        value = attribute.value
        values[attribute.key] = getattr(value, value.WhichOneof("value"))
    return values


async def test_a_durable_turn_has_the_invoke_agent_span_of_a_normal_turn(
    temporal_target: str, tmp_path: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    home = worker_home(tmp_path / "home")
    collector = Collector()
    env = {
        "TALARIA_OTEL": "1",
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    usage = {"input_tokens": 120, "output_tokens": 30}
    script = [call("append_line", {"text": "one"}, usage=usage), text("done", usage=usage)]
    try:
        with ScriptedProvider([*script, *script]) as server:
            workers.append(WorkerProcess(temporal_target, queue, server, home, env=env))
            client = await connect(temporal_target)
            durable = await (await start_turn(client, queue, "append one line")).result()
            normal = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "talaria.cli.main", "chat", "-q", "append one line",
                "--model", "scripted-model", "--base-url", server.openai_base_url,
                "--api-key", "test", "--home", str(home), "--toolsets", "",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env={**os.environ, **env},
            )  # fmt: skip
            _, err = await asyncio.wait_for(normal.communicate(), 120)
            assert normal.returncode == 0, err.decode()

            def turns() -> list[Any]:
                return [s for s in collector.spans if s.name == "invoke_agent talaria"]

            await wait_for(lambda: len(turns()) == 2, "both turn spans", 30)
    finally:
        collector.close()
    by_session = {span_attributes(s)["gen_ai.conversation.id"]: s for s in turns()}
    span = by_session[durable["session_id"]]
    (other,) = [s for sid, s in by_session.items() if sid != durable["session_id"]]
    attributes = span_attributes(span)
    assert set(attributes) == set(span_attributes(other))
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.agent.name"] == "talaria"
    assert attributes["gen_ai.request.model"] == "scripted-model"
    assert attributes["gen_ai.response.model"] == "scripted-model"
    assert attributes["talaria.turn_exit_reason"] == "text_response"
    assert attributes["talaria.api_calls"] == 2
    assert attributes["gen_ai.usage.input_tokens"] == 240
    assert attributes["gen_ai.usage.output_tokens"] == 60
    assert attributes["talaria.task_id"] == durable["task_id"]
    calls = [
        s for s in collector.spans
        if s.name.startswith(("chat ", "execute_tool ")) and s.trace_id != other.trace_id
    ]  # fmt: skip
    assert len(calls) == 3
    for inner in calls:  # the span covers the whole turn
        assert span.start_time_unix_nano <= inner.start_time_unix_nano
        assert inner.end_time_unix_nano <= span.end_time_unix_nano
