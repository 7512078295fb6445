"""Stable prefix and nothing lost (docs/architecture.md) through a whole Agent, a kill -9
included."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from helpers import scripted_agent
from talaria import Agent
from talaria.messages.validate import history_problems
from talaria.testing import ScriptedProvider, calls, text

CHILD = textwrap.dedent(
    """
    import sys, time
    from talaria import Agent, tool

    @tool
    def slow_step(label: str) -> str:
        '''Take a long time.

        Args:
            label: what to work on
        '''
        print("TOOL RUNNING", flush=True)
        time.sleep(60)
        return "never returned"

    agent = Agent(model="scripted-model", base_url=sys.argv[1], api_key="k", home=sys.argv[2],
                  cwd=sys.argv[2], session_id="doomed", tools=[slow_step], toolsets=[],
                  config={"context.engine": "none"})
    agent.run_conversation(user_message="first question")
    agent.run_conversation(user_message="second question")
    """
)


def test_kill_9_mid_turn_leaves_a_resumable_session(tmp_path: Path) -> None:
    server = ScriptedProvider(
        [text("first answer"), calls(("slow_step", {"label": "x"})), text("resumed fine")]
    )
    with server:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, server.openai_base_url, str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "TOOL RUNNING", child.stderr.read()
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        finally:
            if child.poll() is None:
                child.kill()

        with scripted_agent(server, tmp_path, session_id="doomed", tools=[]) as resumed:
            stored = resumed.store.load_messages("doomed")
            result = resumed.run_conversation(user_message="are you still there?")

    # the step in flight is lost whole: no stored call without its result (one commit a step)
    assert [m["role"] for m in stored] == ["user", "assistant", "user"]
    assert history_problems(stored) == []
    assert result["final_response"] == "resumed fine"
    assert result["session_id"] == "doomed"
    assert server.invalid_requests == []
    sent = server.requests[-1].body["messages"]
    assert history_problems(sent) == []
    assert "first question" in json.dumps(sent) and "second question" in json.dumps(sent)


def _prefix(body: dict[str, Any]) -> str:
    return json.dumps([body["messages"][0], body.get("tools")], sort_keys=True)


def test_system_prompt_and_tools_are_byte_identical_across_turns(tmp_path: Path) -> None:
    """Stable prefix: even a memory write mid-session does not touch the prompt prefix (the
    snapshot is frozen at session start and shows up in the next session)."""
    remember = calls(
        ("memory", {"action": "add", "target": "user", "content": "Prefers tabs over spaces."})
    )
    steps = [text(f"answer {i}") for i in range(10)]
    steps.insert(3, remember)
    server = ScriptedProvider([*steps, text("new session")])

    def agent() -> Agent:
        return Agent(
            model="scripted-model",
            base_url=server.openai_base_url,
            api_key="k",
            home=tmp_path,
            cwd=tmp_path,
            config={"context.engine": "none"},
        )

    with server:
        with agent() as first:
            for turn in range(10):
                first.run_conversation(user_message=f"turn {turn}")
        with agent() as fresh:
            fresh.run_conversation(user_message="hello again")

    bodies = [r.body for r in server.requests]
    first_session = {_prefix(body) for body in bodies[:-1]}
    assert len(first_session) == 1, "the prompt prefix changed within a session"
    assert "Prefers tabs" not in bodies[-2]["messages"][0]["content"]
    assert "Prefers tabs" in bodies[-1]["messages"][0]["content"]
    assert server.invalid_requests == []


def test_interrupted_process_leaves_no_half_written_message(tmp_path: Path) -> None:
    """Messages are whole or absent: a kill during a long stream stores no partial answer."""
    script = textwrap.dedent(
        """
        import sys
        from talaria import Agent
        agent = Agent(model="scripted-model", base_url=sys.argv[1], api_key="k",
                      home=sys.argv[2], session_id="streaming", toolsets=[],
                      config={"context.engine": "none"},
                      stream_delta_callback=lambda d: print("DELTA", flush=True))
        agent.run_conversation(user_message="tell me a long story")
        """
    )
    from talaria.testing import Reply

    story = Reply(text="once upon a time " * 50, chunk_size=5, chunk_delay=0.05)
    with ScriptedProvider([story, text("short version")]) as server:
        child = subprocess.Popen(
            [sys.executable, "-c", script, server.openai_base_url, str(tmp_path)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "DELTA"
        time.sleep(0.2)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        with scripted_agent(server, tmp_path, session_id="streaming") as resumed:
            assert resumed.store.load_messages("streaming") == [
                {"role": "user", "content": "tell me a long story"}
            ]
            result = resumed.run_conversation(user_message="just the short version")
    assert result["final_response"] == "short version"
    assert server.invalid_requests == []
