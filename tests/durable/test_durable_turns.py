"""Durable turns on a real Temporal dev server with real `talaria worker` processes and the
scripted provider: a tool loop, an approval answered through the workflow, an interrupt, and
kill -9 of the worker during a model call and during a tool."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import FOREVER
from otlp_collector import Collector
from talaria.config import Config
from talaria.durable.client import DurableTurn, connect, start_turn
from talaria.messages.validate import history_problems
from talaria.store.factory import configured_store
from talaria.store.sqlite import SQLiteSessionStore
from talaria.testing import Fail, ScriptedProvider, call, text
from temporal_cluster import WorkerProcess, turn_across_a_kill, wait_for, worker_home

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(300)]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return worker_home(tmp_path / "home")


def effects(home: Path) -> list[str]:
    path = home / "effects.txt"
    return path.read_text().splitlines() if path.exists() else []


def assert_valid_history(result: dict[str, Any]) -> None:
    problems = history_problems(result["messages"])
    assert problems == [], problems


async def test_a_tool_loop_completes_with_events_and_a_stored_session(
    temporal_target: str, home: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    script = [call("append_line", {"text": "one"}), text("all done"), text("again")]
    with ScriptedProvider(script) as server:
        workers.append(WorkerProcess(temporal_target, queue, server, home))
        client = await connect(temporal_target)
        seen: list[dict[str, Any]] = []
        turn = await start_turn(client, queue, "append one line")
        result = await turn.follow(seen.append)
        follow_up = await start_turn(client, queue, "and again", session=result["session_id"])
        second = await follow_up.result()
        assert server.invalid_requests == []
    assert result["final_response"] == "all done" and result["completed"]
    assert result["api_calls"] == 2 and result["usage"]["total_tokens"] > 0
    assert [m["role"] for m in result["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert result["messages"][2]["content"] == "appended"
    kinds = [event["type"] for event in seen]
    assert kinds[0] == "TurnStarted" and kinds[-1] == "TurnFinished"
    assert {"ToolStarted", "ToolFinished", "TextDelta", "StepFinished"} <= set(kinds)
    assert "".join(e["text"] for e in seen if e["type"] == "TextDelta") == "all done"
    assert second["session_id"] == result["session_id"]
    assert second["messages"][:4] == result["messages"] and len(second["messages"]) == 6
    with SQLiteSessionStore(home / "state.db") as store:  # the worker saved the session
        assert store.load_messages(result["session_id"]) == second["messages"]
        info = store.get_session(result["session_id"])
        assert info is not None and info.usage["total_tokens"] > result["usage"]["total_tokens"]
        records = store.usage_records(session_id=result["session_id"])
        assert [r.calls for r in records] == [2, 1]  # one record per turn and model


async def test_an_approval_is_answered_through_the_workflow(
    temporal_target: str, home: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    (home / "scratch").mkdir()
    script = [call("terminal", {"command": "rm -rf scratch"}), text("removed")]
    with ScriptedProvider(script) as server:
        workers.append(WorkerProcess(temporal_target, queue, server, home, toolsets="terminal"))
        client = await connect(temporal_target)
        turn = await start_turn(client, queue, "remove the scratch dir", answers=True)
        requests: list[dict[str, Any]] = []

        async def answer(event: dict[str, Any]) -> None:
            if event["type"] == "ApprovalRequested":
                requests.append(event)
                assert [p["request_id"] for p in await turn.pending()] == [event["request_id"]]
                assert not await turn.respond("approval:no-such-call", "once")
                assert await turn.respond(event["request_id"], "once")
                assert not await turn.respond(event["request_id"], "once")  # already answered

        result = await turn.follow(answer)
    (request,) = requests
    assert request["command"] == "rm -rf scratch" and request["tool_name"] == "terminal"
    assert request["request_id"] == f"approval:{request['call_id']}"
    assert result["completed"] and not (home / "scratch").exists()
    assert_valid_history(result)


async def test_a_headless_turn_is_denied_approval_without_waiting(
    temporal_target: str, home: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    (home / "scratch").mkdir()
    script = [call("terminal", {"command": "rm -rf scratch"}), text("could not")]
    with ScriptedProvider(script) as server:
        workers.append(WorkerProcess(temporal_target, queue, server, home, toolsets="terminal"))
        client = await connect(temporal_target)
        result = await (await start_turn(client, queue, "remove scratch")).result()
    assert result["completed"] and (home / "scratch").exists()
    assert result["messages"][2]["content"].startswith("Denied")


async def test_an_interrupt_stops_a_turn_waiting_on_the_model(
    temporal_target: str, home: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    with ScriptedProvider([text("too late", delay=FOREVER)]) as server:
        workers.append(WorkerProcess(temporal_target, queue, server, home))
        client = await connect(temporal_target)
        turn = await start_turn(client, queue, "take your time")
        await wait_for(lambda: len(server.requests) == 1, "the model call")
        await turn.interrupt("stop please")
        result = await turn.result()
    assert result["interrupted"] and result["turn_exit_reason"] == "interrupted"
    assert result["interrupt_message"] == "stop please"
    assert [m["role"] for m in result["messages"]] == ["user"]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_kill_9_during_a_tool_the_next_worker_finishes_with_the_effect_once(
    temporal_target: str,
    tmp_path: Path,
    queue: str,
    workers: list[WorkerProcess],
    backend: str,
    request: pytest.FixtureRequest,
) -> None:
    store_url = request.getfixturevalue("pg_clean_url") if backend == "postgres" else None
    home = worker_home(tmp_path / "home", store_url=store_url)
    script = [call("append_line", {"text": "exactly once"}), text("appended it")]
    with ScriptedProvider(script) as server:
        # killed after the effect, before the result was recorded
        turn = await turn_across_a_kill(
            temporal_target, queue, server, home, workers, "append a line"
        )
        result = await turn.result()
        assert server.invalid_requests == []
    assert [line.split(" ", 1)[1] for line in effects(home)] == ["exactly once"]
    assert result["completed"] and result["final_response"] == "appended it"
    assert result["messages"][2]["content"] == "already appended"  # rerun, same key, no effect
    assert_valid_history(result)
    store = configured_store(Config.load(home, overrides={"store.url": store_url}))
    assert store.load_messages(result["session_id"]) == result["messages"]


async def test_kill_9_during_a_model_call_repeats_only_that_call(
    temporal_target: str, home: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    script = [
        call("append_line", {"text": "once"}),
        text("lost with the worker", delay=60),
        text("finished elsewhere"),
    ]
    with ScriptedProvider(script) as server:
        first = WorkerProcess(temporal_target, queue, server, home)
        workers.append(first)
        client = await connect(temporal_target)
        turn = await start_turn(client, queue, "append, then answer")
        await wait_for(lambda: len(server.requests) == 2, "the second model call")
        first.kill9()
        workers.append(WorkerProcess(temporal_target, queue, server, home))
        result = await turn.result()
        assert len(server.requests) == 3  # the recorded first answer was not asked again
        assert server.invalid_requests == []
    assert len(effects(home)) == 1  # the recorded tool result was not run again
    assert result["final_response"] == "finished elsewhere"
    assert_valid_history(result)


async def test_a_tool_not_safe_to_retry_is_reported_not_run_twice(
    temporal_target: str, home: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    script = [call("append_unsafe", {"text": "at most once"}), text("noted")]
    with ScriptedProvider(script) as server:
        turn = await turn_across_a_kill(
            temporal_target, queue, server, home, workers, "append unsafely"
        )
        result = await turn.result()
    assert len(effects(home)) == 1
    assert "not safe to run twice" in result["messages"][2]["content"]
    assert result["completed"]
    assert_valid_history(result)


async def test_a_clarify_question_is_answered_through_the_workflow(
    temporal_target: str, home: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    question = call("clarify", {"question": "Which colour?", "choices": ["red", "blue"]})
    with ScriptedProvider([question, text("blue it is")]) as server:
        workers.append(WorkerProcess(temporal_target, queue, server, home, toolsets="clarify"))
        client = await connect(temporal_target)
        turn = await start_turn(client, queue, "paint it", answers=True)

        async def answer(event: dict[str, Any]) -> None:
            if event["type"] == "ClarifyRequested":
                assert event["choices"] == ["red", "blue"]
                assert await turn.respond(event["request_id"], "blue")

        result = await turn.follow(answer)
    assert result["messages"][2]["content"] == "The user answered: blue"
    assert result["final_response"] == "blue it is"


async def test_a_turn_can_be_followed_from_another_client_and_from_the_cli(
    temporal_target: str, home: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    with ScriptedProvider([text("hello there"), text("from the cli")]) as server:
        workers.append(WorkerProcess(temporal_target, queue, server, home))
        client = await connect(temporal_target)
        turn = await start_turn(client, queue, "hi", workflow_id=f"wf-{queue}")
        other = DurableTurn.attach(await connect(temporal_target), f"wf-{queue}")
        result = await other.result()
        assert result == await turn.result()
        events = await other.events()
        cli = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "talaria.cli.main", "chat", "-q", "again",
            "--resume", result["session_id"], "--temporal", temporal_target,
            "--task-queue", queue, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(cli.communicate(), 120)
    assert result["final_response"] == "hello there"
    assert events[-1]["type"] == "TurnFinished"
    assert cli.returncode == 0, err.decode()
    assert out.decode().strip() == "from the cli"


async def test_the_session_budget_counts_earlier_durable_turns(
    temporal_target: str, home: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    with (home / "config.yaml").open("a") as config:
        config.write("agent:\n  max_session_tokens: 10000\n")
    script = [text("one", usage={"input_tokens": 10_000, "output_tokens": 1_000}), text("two")]
    with ScriptedProvider(script) as server:
        workers.append(WorkerProcess(temporal_target, queue, server, home))
        client = await connect(temporal_target)
        first = await (await start_turn(client, queue, "1")).result()
        session = first["session_id"]
        second = await (await start_turn(client, queue, "2", session=session)).result()
        assert len(server.requests) == 1  # 11000 tokens spent: the second turn calls nothing
    assert first["turn_exit_reason"] == "text_response"
    assert second["turn_exit_reason"] == "budget_exceeded"
    assert "10000 tokens per session (agent.max_session_tokens)" in second["final_response"]
    assert_valid_history(second)


async def test_a_durable_turn_is_one_trace_from_the_cli_to_the_worker(
    temporal_target: str, home: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    collector = Collector()
    env = {
        "TALARIA_OTEL": "1",
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_METRIC_EXPORT_INTERVAL": "200",
    }
    usage = {"input_tokens": 100, "output_tokens": 20}
    script = [call("append_line", {"text": "one"}, usage=usage), text("done", usage=usage)]
    wanted = {"StartWorkflow:TalariaTurn", "chat scripted-model", "execute_tool append_line"}
    wanted.add("invoke_agent talaria")
    try:
        with ScriptedProvider(script) as server:
            workers.append(WorkerProcess(temporal_target, queue, server, home, env=env))
            cli = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "talaria.cli.main", "chat", "-q", "append one line",
                "--temporal", temporal_target, "--task-queue", queue, "--home", str(home),
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env={**os.environ, **env},
            )  # fmt: skip
            out, err = await asyncio.wait_for(cli.communicate(), 120)
            assert cli.returncode == 0, err.decode()

            def names() -> list[str]:
                return [span.name for span in collector.spans]

            await wait_for(lambda: wanted <= set(names()), f"the spans (got {names()})", 30)
            await wait_for(
                lambda: "gen_ai.client.token.usage" in collector.metric_names, "token metrics", 30
            )
    finally:
        collector.close()
    assert out.decode().strip() == "done"
    (start,) = [span for span in collector.spans if span.name == "StartWorkflow:TalariaTurn"]
    turn = [span for span in collector.spans if not span.name.endswith(":events")]
    assert {span.trace_id for span in turn} == {start.trace_id}  # event polls are their own
    assert {"RunWorkflow:TalariaTurn", "RunActivity:open_turn", "RunActivity:finish_turn"} <= {
        span.name for span in turn
    }
    by_id = {span.span_id: span for span in collector.spans}
    answered = []
    for span in collector.spans:
        if span.name.startswith(("chat ", "execute_tool ")):  # inside their activity's span
            activity = by_id[span.parent_span_id].name
            assert activity in ("RunActivity:model_call", "RunActivity:tool_call"), activity
        attributes = {a.key: a.value for a in span.attributes}
        if span.name.startswith("chat ") and "gen_ai.usage.input_tokens" in attributes:
            answered.append(attributes["gen_ai.usage.input_tokens"].int_value)
    assert answered == [100, 100]
    (agent,) = [span for span in turn if span.name == "invoke_agent talaria"]
    assert by_id[agent.parent_span_id].name == "RunActivity:finish_turn"
    totals = {a.key: a.value.int_value for a in agent.attributes if a.key.startswith("gen_ai.u")}
    assert totals["gen_ai.usage.input_tokens"] == 200  # the whole turn's


async def test_a_rejected_key_is_refreshed_on_the_worker(
    temporal_target: str, home: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    with (home / "config.yaml").open("a") as config:
        config.write("retry:\n  max_attempts: 1\n")  # no plain retry: only the refresh helps
    (home / "config.yaml").write_text(
        (home / "config.yaml")
        .read_text()
        .replace("model:\n", "model:\n  api_key_command: echo rotated-key\n", 1)
    )
    with ScriptedProvider([Fail(401), text("in with the new key")]) as server:
        workers.append(WorkerProcess(temporal_target, queue, server, home))
        client = await connect(temporal_target)
        seen: list[dict[str, Any]] = []
        result = await (await start_turn(client, queue, "hi")).follow(seen.append)
        keys = [r.headers.get("authorization") for r in server.requests]
    assert result["final_response"] == "in with the new key" and result["completed"]
    assert keys == ["Bearer test", "Bearer rotated-key"]
    notices = [e["message"] for e in seen if e["type"] == "Notice"]
    assert any("retrying with a refreshed key" in n for n in notices), notices
