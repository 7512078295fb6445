"""SIGTERM ends `talaria serve` promptly even while clients follow event streams: the running
turns are interrupted, each stream ends with the run's final event, and the process exits
(it used to wait for every followed turn to finish, which can be never)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import httpx
import pytest

from server_helpers import ServeProcess, SseEvent, read_events
from talaria.server.runs import TERMINAL_EVENTS
from talaria.testing import Endless, ScriptedProvider, call

pytestmark = pytest.mark.timeout(120)


def _follow(serve: ServeProcess, run_id: str, seen: list[SseEvent], ended: threading.Event) -> None:
    url = f"{serve.url}/v1/runs/{run_id}/events"
    with httpx.stream("GET", url, headers=serve.headers, timeout=60) as response:
        seen.extend(read_events(response))  # appends as they come; returns when the stream ends
    ended.set()


@pytest.mark.parametrize(
    "step",
    [Endless(), call("terminal", {"command": "sleep 120"})],
    ids=["model-streaming", "command-running"],
)
def test_sigterm_ends_the_streams_with_a_final_event_and_exits(
    provider: ScriptedProvider, tmp_path: Path, step: object
) -> None:
    provider.add(step, Endless())
    serve = ServeProcess(provider, tmp_path / "home").start()
    try:
        with serve.http() as http:
            runs = [http.post("/v1/runs", json={"input": f"go {n}"}).json() for n in range(2)]
        followers = []
        for run in runs:
            seen: list[SseEvent] = []
            ended = threading.Event()
            thread = threading.Thread(target=_follow, args=(serve, run["run_id"], seen, ended))
            thread.start()
            followers.append((seen, ended, thread))
        for seen, _, _ in followers:  # both streams are open and the turns under way
            while not any(event.name == "run.started" for event in seen):
                threading.Event().wait(0.02)
        assert serve.proc is not None
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=60) in (0, -signal.SIGTERM)  # uvicorn re-raises it
    finally:
        serve.stop()
    for seen, ended, thread in followers:
        thread.join(timeout=30)
        assert ended.is_set()
        assert seen[-1].name in TERMINAL_EVENTS, [event.name for event in seen]
