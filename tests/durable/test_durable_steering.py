"""Steering a durable turn on a real Temporal dev server with real `talaria worker` processes
and the scripted provider: the steer is a workflow signal, so it is in the workflow's history;
a worker killed while the steer is pending is replaced and the note reaches the model once,
after the tool's result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from talaria.durable.client import connect, start_turn
from talaria.messages.validate import history_problems
from talaria.testing import ScriptedProvider, call, text
from temporal_cluster import WorkerProcess, wait_for, worker_home

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(300)]

STEER = "Also mention the docs folder."


async def test_a_steer_pending_when_the_worker_dies_is_delivered_once(
    temporal_target: str, tmp_path: Path, queue: str, workers: list[WorkerProcess]
) -> None:
    home = worker_home(tmp_path / "home")
    (home / "pause").touch()
    script = [call("append_line", {"text": "one"}), text("appended, and the docs noted")]
    with ScriptedProvider(script) as server:
        first = WorkerProcess(temporal_target, queue, server, home)
        workers.append(first)
        client = await connect(temporal_target)
        turn = await start_turn(client, queue, "append a line")
        await wait_for(lambda: (home / "effects.txt").exists(), "the tool's side effect")
        await turn.steer(STEER)
        first.kill9()  # the steer is pending: the tool's result is not recorded yet
        (home / "pause").unlink()
        workers.append(WorkerProcess(temporal_target, queue, server, home))
        result = await turn.result()
        events = await turn.events()
        assert server.invalid_requests == []

    assert result["completed"] and result["final_response"] == "appended, and the docs noted"
    users = [m["content"] for m in result["messages"] if m["role"] == "user"]
    assert users == ["append a line", STEER], "delivered once"
    roles = [m["role"] for m in result["messages"]]
    assert roles == ["user", "assistant", "tool", "user", "assistant"], "after the tool result"
    assert history_problems(result["messages"]) == []
    last = json.dumps(server.requests[-1].body)
    assert last.count(STEER) == 1 and last.index('"role": "tool"') < last.index(STEER)
    assert all(STEER not in json.dumps(request.body) for request in server.requests[:-1])
    accepted = [e for e in events if e["type"] == "SteerAccepted"]
    delivered = [e for e in events if e["type"] == "SteerDelivered"]
    assert [e["text"] for e in accepted] == [STEER]
    assert [e["steer_ids"] for e in delivered] == [[accepted[0]["steer_id"]]]
