"""A step is one store commit: the assistant message and its tool results are saved together.

So a process killed while a tool runs loses that step and nothing else, and never leaves a
stored tool call without its result (or a result without its call), on either store.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from helpers import add, scripted_agent
from talaria import Agent
from talaria.messages.validate import history_problems
from talaria.store.sqlite import SQLiteSessionStore
from talaria.testing import ScriptedModel, ScriptedProvider, call, calls, text


class CountingStore(SQLiteSessionStore):
    """The real SQLite store, counting its append transactions (each is one commit)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.appends: list[list[str]] = []

    def append_messages(
        self, session_id: str, items: list[tuple[int, dict[str, Any]]], *, writer: str | None = None
    ) -> None:
        super().append_messages(session_id, items, writer=writer)
        self.appends.append([message["role"] for _, message in items])


def _run(tmp_path: Path, steps: list[Any], prompt: str) -> tuple[CountingStore, dict[str, Any]]:
    store = CountingStore(tmp_path / "state.db")
    with Agent(
        model=ScriptedModel(steps), home=tmp_path, store=store, tools=[add], toolsets=[],
        config={"context.engine": "none"},
    ) as agent:  # fmt: skip
        return store, agent.run_conversation(user_message=prompt)


def test_each_step_is_saved_in_one_commit(tmp_path: Path) -> None:
    steps = [calls(("add", {"a": n, "b": 1}), ("add", {"a": n, "b": 2})) for n in range(4)]
    store, result = _run(tmp_path, [*steps, text("done")], "add things")
    stored = store.load_messages(result["session_id"])
    assert result["final_response"] == "done"
    assert store.appends == [
        ["user"],
        *[["assistant", "tool", "tool"]] * 4,
        ["assistant"],
    ]
    assert stored == result["messages"] and history_problems(stored) == []


def test_a_loop_stopped_by_the_guard_saves_its_step_whole(tmp_path: Path) -> None:
    same = ("add", {"a": 1, "b": 1})
    store, result = _run(tmp_path, [calls(same) for _ in range(8)], "again and again")
    stored = store.load_messages(result["session_id"])
    assert result["turn_exit_reason"] == "loop_detected"
    assert store.appends[-1] == ["assistant", "tool"], "the stopped call's result came with it"
    assert all(roles[0] != "tool" for roles in store.appends)
    assert history_problems(stored) == []


KILLED_IN_A_TOOL = textwrap.dedent(
    """
    import sys, threading
    from talaria import Agent, tool

    @tool
    def slow_lookup(key: str) -> str:
        '''Look a key up (slowly).

        Args:
            key: what to look up
        '''
        print("IN TOOL", key, flush=True)
        threading.Event().wait(60)
        return "never"

    @tool
    def quick(key: str) -> str:
        '''Look a key up.

        Args:
            key: what to look up
        '''
        return "found " + key

    agent = Agent(model="scripted-model", base_url=sys.argv[1], api_key="k", home=sys.argv[2],
                  session_id="killed", tools=[slow_lookup, quick], toolsets=[],
                  config={"context.engine": "none"})
    agent.run_conversation(user_message="look things up")
    """
)


def test_a_process_killed_during_a_tool_loses_only_that_step(tmp_path: Path) -> None:
    script = [call("quick", {"key": "a"}), call("slow_lookup", {"key": "b"})]
    with ScriptedProvider(script) as server:
        child = subprocess.Popen(
            [sys.executable, "-c", KILLED_IN_A_TOOL, server.openai_base_url, str(tmp_path)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "IN TOOL b"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        with SQLiteSessionStore(tmp_path / "state.db") as store:
            stored = store.load_messages("killed")
        assert [m["role"] for m in stored] == ["user", "assistant", "tool"]
        assert stored[2]["content"] == "found a" and history_problems(stored) == []
        server.add(text("resumed fine"))
        with scripted_agent(server, tmp_path, session_id="killed") as resumed:
            result = resumed.run_conversation(user_message="go on")
    assert result["final_response"] == "resumed fine"
    assert server.invalid_requests == []
