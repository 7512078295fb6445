"""Steering through `talaria serve`: a real server process, its runs API over HTTP, the events
read as raw server-sent events; the scripted provider checks every request is valid."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from server_helpers import ServeProcess, SseEvent, read_events
from talaria.testing import ScriptedProvider, call, text

pytestmark = pytest.mark.timeout(120)


def _events_until(http: object, run_id: str, stop: str) -> Iterator[SseEvent]:
    """The run's events from the start, until (and with) the first one named `stop`."""
    with http.stream("GET", f"/v1/runs/{run_id}/events") as response:  # type: ignore[attr-defined]
        for event in read_events(response):
            yield event
            if event.name == stop:
                return


def _start_gated_run(serve: ServeProcess, doomed: Path) -> tuple[str, str, str]:
    """A run whose first tool call waits for an approval: (run id, session id, request id)."""
    with serve.http() as http:
        run = http.post("/v1/runs", json={"input": f"remove {doomed}"}).json()
        asked = None
        for event in _events_until(http, run["run_id"], "approval.requested"):
            asked = event
        assert asked is not None and asked.name == "approval.requested"
        return run["run_id"], run["session_id"], asked.data["request_id"]


def test_steer_queue_and_when_busy_over_the_runs_api(tmp_path: Path) -> None:
    home = tmp_path / "home"
    doomed = home / "old-build"
    doomed.mkdir(parents=True)
    steps = [
        call("terminal", {"command": f"rm -rf {doomed}"}),
        text("Removed it, and noted the docs."),
        text("Here is the queued answer."),
    ]
    with ScriptedProvider(steps) as provider, ServeProcess(provider, home) as serve:
        run_id, session_id, request_id = _start_gated_run(serve, doomed)
        with serve.http() as http:
            busy = http.post("/v1/runs", json={"input": "hello", "session_id": session_id})
            assert busy.status_code == 409 and "when_busy" in busy.json()["error"]["message"]

            steered = http.post(f"/v1/runs/{run_id}/steer", json={"text": "mention the docs"})
            assert steered.status_code == 202 and steered.json()["steer_id"]
            queued = http.post(
                f"/v1/sessions/{session_id}/queue", json={"text": "then summarise"}
            ).json()
            assert queued["run_id"] == run_id and queued["message_id"]
            joined = http.post(
                "/v1/runs",
                json={"input": "wrong", "session_id": session_id, "when_busy": "sideways"},
            )
            assert joined.status_code == 422

            http.post(f"/v1/runs/{run_id}/approvals/{request_id}", json={"decision": "once"})
            names = [e.name for e in _events_until(http, run_id, "run.completed")]
            final = http.get(f"/v1/runs/{run_id}").json()

            late = http.post(f"/v1/runs/{run_id}/steer", json={"text": "too late"})
            assert late.status_code == 409
            empty = http.post(f"/v1/runs/{run_id}/steer", json={"text": ""})
            assert empty.status_code in (409, 422)

        assert names.index("steer.accepted") < names.index("steer.delivered")
        assert names.index("message.queued") < names.index("queued_message.started")
        assert final["final_response"] == "Here is the queued answer."
        second = json.dumps(provider.requests[1].body)
        assert second.index("mention the docs") > second.index("tool"), "after the result"
        assert "then summarise" in json.dumps(provider.requests[2].body)
        assert provider.invalid_requests == []
    assert not doomed.exists()


def test_a_run_sent_with_when_busy_steer_joins_the_running_turn(tmp_path: Path) -> None:
    home = tmp_path / "home"
    doomed = home / "old-build"
    doomed.mkdir(parents=True)
    steps = [call("terminal", {"command": f"rm -rf {doomed}"}), text("done")]
    with ScriptedProvider(steps) as provider, ServeProcess(provider, home) as serve:
        run_id, session_id, request_id = _start_gated_run(serve, doomed)
        with serve.http() as http:
            body = {"input": "be quick", "session_id": session_id, "when_busy": "steer"}
            joined = http.post("/v1/runs", json=body)
            assert joined.status_code == 202 and joined.json()["run_id"] == run_id
            http.post(f"/v1/runs/{run_id}/approvals/{request_id}", json={"decision": "deny"})
            events = list(_events_until(http, run_id, "run.completed"))
        delivered = [e for e in events if e.name == "steer.delivered"]
        assert delivered and delivered[0].data["iteration"] == 2
        assert "be quick" in json.dumps(provider.requests[1].body)
    assert doomed.exists(), "the approval was denied"
