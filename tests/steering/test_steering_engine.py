"""Steer, queue and interrupt while a turn runs, through a real Agent and the scripted provider
(strict: a request the real provider would reject fails the test) in all three API modes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from helpers import MODES, SRC, scripted_agent
from talaria import events as ev
from talaria import tool
from talaria.background import run_sync
from talaria.loop.steering import TurnMismatch
from talaria.store.sqlite import SQLiteSessionStore
from talaria.testing import ScriptedProvider, call, text

STEER = "Also mention the docs folder."


class Recorder:
    """Every event of the agent, and a hook to act when one of a kind arrives."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.on: dict[type, Any] = {}

    def __call__(self, event: Any) -> None:
        self.events.append(event)
        action = self.on.pop(type(event), None)
        if action is not None:
            action(event)

    def of(self, kind: type) -> list[Any]:
        return [event for event in self.events if isinstance(event, kind)]


def _body_text(server: ScriptedProvider, index: int) -> str:
    return json.dumps(server.requests[index].body)


@pytest.mark.parametrize("mode", MODES)
def test_a_steer_during_a_tool_reaches_the_next_call_after_the_results(
    mode: str, tmp_path: Path
) -> None:
    steps = [call("add", {"a": 2, "b": 40}), text("The sum is 42; the docs are in docs/.")]
    with ScriptedProvider(steps) as server:
        agent = scripted_agent(server, tmp_path, mode)
        seen = Recorder()
        agent.subscribe(seen)
        seen.on[ev.ToolStarted] = lambda _: agent.steer(STEER)
        result = agent.run_conversation("Add 2 and 40.")

        assert result["completed"], result
        assert server.invalid_requests == [], "every request valid for a strict provider"
        second = _body_text(server, 1)
        assert STEER not in _body_text(server, 0)
        assert second.index('"42"') < second.index(STEER), "the steer follows the tool result"
        roles = [m["role"] for m in result["messages"]]
        assert roles == ["user", "assistant", "tool", "user", "assistant"]
        assert result["messages"][3]["content"] == STEER, "stored as the user note it was"

        accepted, delivered = seen.of(ev.SteerAccepted), seen.of(ev.SteerDelivered)
        assert [a.text for a in accepted] == [STEER]
        assert delivered[0].steer_ids == [accepted[0].steer_id]
        assert delivered[0].iteration == 2
        assert delivered[0].task_id == accepted[0].task_id == result["task_id"]


def test_several_steers_are_joined_in_order(tmp_path: Path) -> None:
    steps = [call("add", {"a": 1, "b": 1}), text("ok")]
    with ScriptedProvider(steps) as server:
        agent = scripted_agent(server, tmp_path)
        seen = Recorder()
        agent.subscribe(seen)

        def two(_: Any) -> None:
            agent.steer("first note")
            agent.steer("second note")

        seen.on[ev.ToolStarted] = two
        result = agent.run_conversation("go")
        assert result["messages"][3]["content"] == "first note\n\nsecond note"
        assert len(seen.of(ev.SteerDelivered)) == 1


def test_a_steer_after_the_last_model_call_runs_as_the_next_message(tmp_path: Path) -> None:
    steps = [text("First answer.", delay=0.3), text("Answer to the late note.")]
    with ScriptedProvider(steps) as server:
        agent = scripted_agent(server, tmp_path)
        seen = Recorder()
        agent.subscribe(seen)
        seen.on[ev.ThinkingStarted] = lambda _: agent.steer("a late note")
        result = agent.run_conversation("hello")

        assert result["final_response"] == "Answer to the late note."
        queued = seen.of(ev.MessageQueued)
        assert len(queued) == 1 and queued[0].from_steer and queued[0].text == "a late note"
        started = seen.of(ev.QueuedMessageStarted)
        assert [s.message_id for s in started] == [queued[0].message_id]
        assert any("runs as the next message" in n.message for n in seen.of(ev.Notice))
        users = [m["content"] for m in result["messages"] if m["role"] == "user"]
        assert users == ["hello", "a late note"]
        assert len(seen.of(ev.TurnFinished)) == 2
        assert server.invalid_requests == []


@pytest.mark.parametrize("mode", MODES)
def test_a_queued_message_runs_after_the_turn(mode: str, tmp_path: Path) -> None:
    steps = [call("add", {"a": 1, "b": 2}), text("three"), text("queued answer")]
    with ScriptedProvider(steps) as server:
        agent = scripted_agent(server, tmp_path, mode)
        seen = Recorder()
        agent.subscribe(seen)
        seen.on[ev.ToolStarted] = lambda _: agent.queue("then say hi")
        result = agent.run_conversation("add 1 and 2")

        assert result["final_response"] == "queued answer"
        assert "then say hi" not in _body_text(server, 1), "not part of the running turn"
        assert "then say hi" in _body_text(server, 2)
        order = [
            type(e).__name__
            for e in seen.events
            if isinstance(
                e, (ev.MessageQueued, ev.QueuedMessageStarted, ev.TurnFinished, ev.TurnStarted)
            )
        ]
        assert order == [
            "TurnStarted", "MessageQueued", "TurnFinished",
            "QueuedMessageStarted", "TurnStarted", "TurnFinished",
        ]  # fmt: skip
        assert agent.queued_messages == []
        assert server.invalid_requests == []


def test_an_interrupt_with_a_message_stops_the_turn_and_runs_the_message(tmp_path: Path) -> None:
    release = threading.Event()

    @tool
    def slow() -> str:
        """Wait until released."""
        release.wait(30)
        return "finished"

    steps = [call("slow", {}), text("Doing the new thing instead.")]
    with ScriptedProvider(steps) as server:
        agent = scripted_agent(server, tmp_path, tools=[slow])
        seen = Recorder()
        agent.subscribe(seen)

        def change_course(_: Any) -> None:
            agent.interrupt("do the new thing instead")
            release.set()

        seen.on[ev.ToolStarted] = change_course
        result = agent.run_conversation("do the old thing")

        finished = seen.of(ev.TurnFinished)
        assert [f.exit_reason for f in finished] == ["interrupted", "text_response"]
        assert result["final_response"] == "Doing the new thing instead."
        assert seen.of(ev.QueuedMessageStarted)[0].text == "do the new thing instead"
        assert server.invalid_requests == []


def test_an_interrupt_with_only_a_reason_runs_nothing_more(tmp_path: Path) -> None:
    steps = [call("add", {"a": 1, "b": 2}), text("never")]
    with ScriptedProvider(steps) as server:
        agent = scripted_agent(server, tmp_path)
        seen = Recorder()
        agent.subscribe(seen)
        seen.on[ev.ToolStarted] = lambda _: (
            agent.queue("waits for the next run"),
            agent.interrupt(reason="the user pressed stop"),
        )
        result = agent.run_conversation("add")
        assert result["interrupted"] and result["interrupt_message"] == "the user pressed stop"
        assert len(server.requests) == 1
        assert agent.queued_messages == ["waits for the next run"], "kept for the next run"


def test_a_steer_or_interrupt_naming_another_turn_is_refused(tmp_path: Path) -> None:
    steps = [call("add", {"a": 1, "b": 2}), text("three")]
    with ScriptedProvider(steps) as server:
        agent = scripted_agent(server, tmp_path)
        seen = Recorder()
        agent.subscribe(seen)
        refused: list[str] = []

        def late_click(event: Any) -> None:
            running = agent.running_turn
            assert running is not None
            agent.steer("meant for this turn", turn_id=running)
            for stale in (lambda: agent.steer("x", turn_id="task_old"),
                          lambda: agent.interrupt(turn_id="task_old")):  # fmt: skip
                try:
                    stale()
                except TurnMismatch as refusal:
                    refused.append(str(refusal))

        seen.on[ev.ToolStarted] = late_click
        result = agent.run_conversation("add")
        assert result["completed"] and len(refused) == 2
        assert "task_old is not running" in refused[0]
        assert result["messages"][3]["content"] == "meant for this turn"
    with pytest.raises(TurnMismatch):
        agent.steer("after the end", turn_id=result["task_id"])


def test_messages_queued_between_runs_run_with_arun_queued(tmp_path: Path) -> None:
    steps = [text("first answer"), text("second answer")]
    with ScriptedProvider(steps) as server:
        agent = scripted_agent(server, tmp_path)
        seen = Recorder()
        agent.subscribe(seen)
        with pytest.raises(ValueError, match="no message is queued"):
            run_sync(agent.arun_queued())
        agent.queue("first")
        agent.queue("second")
        result = run_sync(agent.arun_queued())

        assert result["final_response"] == "second answer"
        assert [s.text for s in seen.of(ev.QueuedMessageStarted)] == ["first", "second"]
        assert [_last_user_text(r.body) for r in server.requests] == ["first", "second"]
        assert agent.queued_messages == []
        assert server.invalid_requests == []


CRASHING_HOLDER = """
import os, sys
from talaria import Agent, events as ev, tool

@tool
def work() -> str:
    '''Do some work.'''
    agent.queue("the message that must survive")
    os._exit(9)  # the process dies mid-turn, before the queue could run

agent = Agent(model="scripted-model", api_key="k", base_url=sys.argv[1], home=sys.argv[2],
              cwd=sys.argv[2], tools=[work], toolsets=[], session_id="steer-crash",
              config={"context.engine": "none"})
agent.run_conversation("start working")
"""


def test_a_queued_message_survives_a_crash_and_runs_once(tmp_path: Path) -> None:
    steps = [call("work", {}), text("resumed"), text("ran the survivor"), text("last")]
    with ScriptedProvider(steps) as server:
        died = subprocess.run(
            [sys.executable, "-c", CRASHING_HOLDER, server.openai_base_url, str(tmp_path)],
            env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert died.returncode == 9, died.stderr[-2000:]

        agent = scripted_agent(server, tmp_path, session_id="steer-crash")
        result = agent.run_conversation("are you there?")
        assert result["final_response"] == "ran the survivor"
        survivors = [
            m for m in result["messages"] if m.get("content") == "the message that must survive"
        ]
        assert len(survivors) == 1
        again = scripted_agent(server, tmp_path, session_id="steer-crash")
        final = again.run_conversation("one more")
        assert final["final_response"] == "last", "nothing left in the queue runs twice"
        asked = [_last_user_text(request.body) for request in server.requests[1:]]
        assert asked[0].endswith("are you there?")  # after the crashed turn's own message
        assert asked[1:] == ["the message that must survive", "one more"]


def _last_user_text(body: dict[str, Any]) -> str:
    user = [m for m in body["messages"] if m["role"] == "user"][-1]
    return str(user["content"])


def test_the_queue_is_edited_and_taken_back_in_the_store_too(tmp_path: Path) -> None:
    steps = [text("first"), text("ran the edited one"), text("last")]
    with ScriptedProvider(steps) as server:
        agent = scripted_agent(server, tmp_path, session_id="queue-edit")
        agent.run_conversation("start")
        first, second, third = (agent.queue(t) for t in ("one", "two", "three"))
        assert agent.edit_queued(second, "two, said better")
        assert agent.remove_queued(first) and agent.remove_queued(third)
        assert not agent.remove_queued(first), "already taken back"
        assert [(n.id, n.text) for n in agent.queued] == [(second, "two, said better")]

        elsewhere = scripted_agent(server, tmp_path, session_id="queue-edit")
        assert elsewhere.queued_messages == ["two, said better"], "as the store keeps it"
        assert elsewhere.run_queued()["final_response"] == "ran the edited one"
        assert agent.clear_queue() == 1, "this agent still held it in memory"
        assert scripted_agent(server, tmp_path, session_id="queue-edit").queued_messages == []
        assert [_last_user_text(r.body) for r in server.requests[1:]] == ["two, said better"]


def test_a_message_queued_before_the_session_exists_is_kept_once_it_does(tmp_path: Path) -> None:
    with ScriptedProvider([call("add", {"a": 1, "b": 2}), text("never")]) as server:
        agent = scripted_agent(server, tmp_path)
        agent.queue("queued before any turn")
        seen = Recorder()
        agent.subscribe(seen)
        seen.on[ev.ToolStarted] = lambda _: agent.interrupt(reason="stop")  # the queue waits
        result = agent.run_conversation("hello")
        assert result["interrupted"]
        kept = scripted_agent(server, tmp_path, session_id=result["session_id"])
        assert kept.queued_messages == ["queued before any turn"]


def test_a_queue_follows_the_agent_to_another_session_and_runs_once(tmp_path: Path) -> None:
    steps = [text("a"), text("b"), text("the moved message ran")]
    with ScriptedProvider(steps) as server:
        agent = scripted_agent(server, tmp_path, session_id="first-session")
        agent.run_conversation("in the first session")
        agent.queue("moves along")
        agent.session_id = "second-session"
        result = agent.run_conversation("in the second session")
        assert result["final_response"] == "the moved message ran"
        for session in ("first-session", "second-session"):
            again = scripted_agent(server, tmp_path, session_id=session)
            assert again.queued_messages == [], f"{session} keeps nothing to run twice"


class CountingStore(SQLiteSessionStore):
    """The real SQLite store, counting the session lookups and state reads it answers."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.reads = 0

    def get_session(self, session_id: str) -> Any:
        self.reads += 1
        return super().get_session(session_id)

    def get_state(self, session_id: str, key: str) -> Any:
        self.reads += 1
        return super().get_state(session_id, key)


@pytest.mark.parametrize("stored", [True, False])
def test_a_screen_listing_the_queue_on_every_refresh_reads_the_store_once(
    tmp_path: Path, stored: bool
) -> None:
    """Before its first turn, an agent on a named session (stored or not yet) lists that
    session's kept queue; its own changes show at once, without asking the store again."""
    with ScriptedProvider([text("first"), text("ran the kept one")]) as server:
        if stored:
            holder = scripted_agent(server, tmp_path, session_id="refresh")
            holder.run_conversation("start")
            holder.queue("kept")
            holder.close()
        store = CountingStore(tmp_path / "state.db")
        agent = scripted_agent(server, tmp_path, session_id="refresh", store=store)
        kept = ["kept"] if stored else []
        assert agent.queued_messages == kept
        asked = store.reads
        for _ in range(20):
            assert agent.queued_messages == kept
        added = agent.queue("mine")
        assert agent.queued_messages == [*kept, "mine"]
        assert agent.edit_queued(added, "mine, edited")
        assert agent.queued_messages == [*kept, "mine, edited"]
        assert store.reads == asked
        agent.session_id = "refresh"  # named again: looked up again
        assert agent.queued_messages == [*kept, "mine, edited"]
        assert store.reads > asked
        store.close()
