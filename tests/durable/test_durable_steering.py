"""Steering a durable turn on a real Temporal dev server with real `talaria worker` processes
and the scripted provider. Steers and queued messages are workflow signals, so they are in the
workflow's history: a worker killed while one is pending is replaced, and the note reaches the
model once, after the tool's result, or the queued message runs once, after the turn."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from talaria.durable.client import connect, start_turn
from talaria.messages.validate import history_problems
from talaria.store.sqlite import SQLiteSessionStore
from talaria.testing import ScriptedProvider, call, text
from talaria.testing.script import Step
from temporal_cluster import WorkerProcess, turn_across_a_kill, wait_for, worker_home

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(300)]

STEER = "Also mention the docs folder."
QUEUED = "Then say hi."


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


def users(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "user"]


async def test_a_steer_pending_when_the_worker_dies_is_delivered_once(
    temporal_target: str, tmp_path: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    home = worker_home(tmp_path / "home")
    script = [call("append_line", {"text": "one"}), text("appended, and the docs noted")]
    with ScriptedProvider(script) as server:
        # the steer is pending when the worker dies: the tool's result is not recorded yet
        turn = await turn_across_a_kill(
            temporal_target, queue, server, home, workers, "append a line",
            lambda turn: turn.steer(STEER),
        )  # fmt: skip
        result = await turn.result()
        events = await turn.events()
        assert server.invalid_requests == []

    assert result["completed"] and result["final_response"] == "appended, and the docs noted"
    assert users(result["messages"]) == ["append a line", STEER], "delivered once"
    roles = [m["role"] for m in result["messages"]]
    assert roles == ["user", "assistant", "tool", "user", "assistant"], "after the tool result"
    assert history_problems(result["messages"]) == []
    last = json.dumps(server.requests[-1].body)
    assert last.count(STEER) == 1 and last.index('"role": "tool"') < last.index(STEER)
    assert all(STEER not in json.dumps(request.body) for request in server.requests[:-1])
    accepted, delivered = of(events, "SteerAccepted"), of(events, "SteerDelivered")
    assert [e["text"] for e in accepted] == [STEER]
    assert [e["steer_ids"] for e in delivered] == [[accepted[0]["steer_id"]]]


async def test_a_queued_message_pending_when_the_worker_dies_runs_once_after_the_turn(
    temporal_target: str, tmp_path: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    home = worker_home(tmp_path / "home")
    script = [call("append_line", {"text": "one"}), text("appended"), text("hi")]
    with ScriptedProvider(script) as server:
        turn = await turn_across_a_kill(
            temporal_target, queue, server, home, workers, "append a line",
            lambda turn: turn.queue(QUEUED),
        )  # fmt: skip
        result = await turn.result()
        events = await turn.events()
        assert server.invalid_requests == []

    assert result["completed"] and result["final_response"] == "hi"
    assert users(result["messages"]) == ["append a line", QUEUED], "it ran once"
    roles = [m["role"] for m in result["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert len(server.requests) == 3
    assert QUEUED not in json.dumps(server.requests[1].body), "not part of the running turn"
    (queued,) = of(events, "MessageQueued")
    (started,) = of(events, "QueuedMessageStarted")
    assert queued["text"] == QUEUED and not queued["from_steer"]
    assert started["message_id"] == queued["message_id"]
    finished = of(events, "TurnFinished")
    assert len(finished) == 2 and started["task_id"] == result["task_id"]
    with SQLiteSessionStore(home / "state.db") as store:
        assert store.load_messages(result["session_id"]) == result["messages"]


async def test_a_steer_after_the_last_model_call_runs_as_the_next_message(
    temporal_target: str, tmp_path: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    home = worker_home(tmp_path / "home")
    asked, release = threading.Event(), threading.Event()

    def held_answer(_body: dict[str, Any]) -> Step:
        asked.set()
        release.wait(120)
        return text("first answer")

    with ScriptedProvider([held_answer, text("answered the late note")]) as server:
        workers.append(WorkerProcess(temporal_target, queue, server, home))
        turn = await start_turn(await connect(temporal_target), queue, "hello")
        await wait_for(asked.is_set, "the model call")
        await turn.steer("a late note")  # the turn's last model call is under way
        release.set()
        result = await turn.result()
        events = await turn.events()
        assert server.invalid_requests == []

    assert result["final_response"] == "answered the late note"
    assert users(result["messages"]) == ["hello", "a late note"]
    (queued,) = of(events, "MessageQueued")
    assert queued["from_steer"] and queued["text"] == "a late note"
    assert any("runs as the next message" in e["message"] for e in of(events, "Notice"))
    assert of(events, "QueuedMessageStarted")[0]["message_id"] == queued["message_id"]
    assert of(events, "SteerDelivered") == []


async def test_messages_an_interrupt_left_queued_run_with_the_sessions_next_turn(
    temporal_target: str, tmp_path: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    home = worker_home(tmp_path / "home")
    (home / "pause").touch()
    script = [call("append_line", {"text": "one"}), text("going on"), text("the kept one ran")]
    with ScriptedProvider(script) as server:
        workers.append(WorkerProcess(temporal_target, queue, server, home))
        client = await connect(temporal_target)
        turn = await start_turn(client, queue, "append a line")
        await wait_for(lambda: (home / "effects.txt").exists(), "the tool's side effect")
        await turn.queue(QUEUED)
        await turn.interrupt()
        interrupted = await turn.result()
        notices = [e["message"] for e in of(await turn.events(), "Notice")]
        (home / "pause").unlink()
        session = interrupted["session_id"]
        with SQLiteSessionStore(home / "state.db") as store:
            kept = store.get_state(session, "queued_messages")

        again = await start_turn(client, queue, "go on", session=session)
        result = await again.result()
        events = await again.events()
        assert server.invalid_requests == []

    assert interrupted["interrupted"] and any("did not run" in n for n in notices)
    assert [note["text"] for note in kept] == [QUEUED], "kept with the session in the store"
    assert result["final_response"] == "the kept one ran"
    assert users(result["messages"]) == ["append a line", "go on", QUEUED]
    assert of(events, "QueuedMessageStarted")[0]["message_id"] == kept[0]["id"]
    with SQLiteSessionStore(home / "state.db") as store:
        assert store.get_state(session, "queued_messages") == [], "it ran: nothing runs twice"
