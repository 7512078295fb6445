"""The core loop's behaviour, through the official SDKs, against the strict scripted provider.

Every test runs unchanged in all three API modes: the loop must not care which wire it speaks.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from helpers import FOREVER, MODES, add, scripted_agent, tool_results, when
from talaria import Agent, tool
from talaria.testing.script import Reply, ScriptedCall, calls, text
from talaria.testing.server import ScriptedProvider

MEETING = threading.Barrier(2, timeout=60)
"""Two calls of `meet` return only when both are running at once (else one breaks the barrier)."""


@tool
def meet(name: str) -> str:
    """Wait until another call of this tool is running too, then say so.

    Args:
        name: who is waiting
    """
    MEETING.wait()
    return f"{name} met"


@tool
def explode() -> str:
    """A tool that always fails."""
    raise RuntimeError("the flux capacitor is cracked")


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make_agent(server: ScriptedProvider, mode: str, home: Path, **kwargs: Any) -> Agent:
    kwargs.setdefault("tools", [add, meet, explode])
    return scripted_agent(server, home, mode, **kwargs)


def test_text_answer(provider: ScriptedProvider, mode: str, tmp_path: Path) -> None:
    provider.add(text("Hello there."))
    with make_agent(provider, mode, tmp_path) as agent:
        result = agent.run_conversation(user_message="hi")
    assert result["final_response"] == "Hello there."
    assert result["completed"] and not result["failed"] and not result["interrupted"]
    assert result["turn_exit_reason"] == "text_response"
    assert result["api_calls"] == 1
    assert result["api_mode"] == mode
    assert [m["role"] for m in result["messages"]] == ["user", "assistant"]
    assert result["usage"]["total_tokens"] > 0
    assert provider.invalid_requests == []


def test_parallel_tools_run_together_and_keep_call_order(
    provider: ScriptedProvider, mode: str, tmp_path: Path
) -> None:
    provider.add(
        calls(("meet", {"name": "first"}), ("add", {"a": 2, "b": 3}), ("meet", {"name": "last"})),
        text("done"),
    )
    MEETING.reset()
    with make_agent(provider, mode, tmp_path) as agent:
        result = agent.run_conversation(user_message="go")
    assert result["final_response"] == "done"
    assert tool_results(result) == ["first met", "5", "last met"], "both meets ran at once"
    assert provider.invalid_requests == []


def test_tool_failures_become_results_and_the_turn_goes_on(
    provider: ScriptedProvider, mode: str, tmp_path: Path
) -> None:
    provider.add(
        Reply(
            tool_calls=[
                ScriptedCall("explode", {}),
                ScriptedCall("no_such_tool", {"x": 1}),
                ScriptedCall("add", '{"a": 1, "b"'),
            ]
        ),
        text("recovered"),
    )
    with make_agent(provider, mode, tmp_path) as agent:
        result = agent.run_conversation(user_message="try things")
    exploded, unknown, truncated = tool_results(result)
    assert "flux capacitor" in exploded and exploded.startswith("Error")
    assert "unknown tool" in unknown and "add" in unknown
    assert "not executed" in truncated
    assert result["final_response"] == "recovered"
    # The model saw all three errors on its second request.
    second = provider.requests[-1].body
    assert "flux capacitor" in str(second)
    assert provider.invalid_requests == []


def test_budget_exhaustion_asks_for_one_tool_free_summary(
    provider: ScriptedProvider, mode: str, tmp_path: Path
) -> None:
    provider.add(*[calls(("add", {"a": i, "b": 1})) for i in range(3)], text("summary of work"))
    with make_agent(provider, mode, tmp_path, max_iterations=3) as agent:
        result = agent.run_conversation(user_message="loop forever")
    assert result["turn_exit_reason"] == "max_iterations_reached"
    assert result["final_response"] == "summary of work"
    assert result["api_calls"] == 4
    last = provider.requests[-1].body
    choice = last.get("tool_choice")
    assert choice in ("none", {"type": "none"}) or not last.get("tools")
    assert provider.invalid_requests == []


def test_a_call_written_as_the_summary_is_never_the_answer(
    provider: ScriptedProvider, mode: str, tmp_path: Path
) -> None:
    """Small models often answer the summary request with one more call, as text."""
    spelled = '{"name": "add", "arguments": {"a": 1, "b": 2}}'
    provider.add(calls(("add", {"a": 0, "b": 1})), text(f"Next:\n```json\n{spelled}\n```"))
    provider.add(calls(("add", {"a": 0, "b": 1})), text(spelled))
    with make_agent(provider, mode, tmp_path, max_iterations=1) as agent:
        first = agent.run_conversation(user_message="keep adding")
        second = agent.run_conversation(user_message="again")
    assert first["turn_exit_reason"] == "max_iterations_reached"
    assert first["final_response"] == "Next:"
    assert second["final_response"].startswith("(The budget ran out")
    assert '"arguments"' not in str(second["messages"][-1]["content"])
    assert provider.invalid_requests == []


def test_a_call_cut_off_in_the_summary_is_never_the_answer(
    provider: ScriptedProvider, mode: str, tmp_path: Path
) -> None:
    """The summary ran into the output limit in the middle of a call the model wrote."""
    provider.add(calls(("add", {"a": 0, "b": 1})), text('Done so far.\n{"name": "add", "argu'))
    provider.add(calls(("add", {"a": 0, "b": 1})), text('{"name": "add", "arguments": {"a": 1'))
    with make_agent(provider, mode, tmp_path, max_iterations=1) as agent:
        first = agent.run_conversation(user_message="keep adding")
        second = agent.run_conversation(user_message="again")
    assert first["final_response"] == "Done so far."
    assert second["final_response"].startswith("(The budget ran out")


@pytest.mark.timeout(60)
def test_interrupt_during_model_call(provider: ScriptedProvider, mode: str, tmp_path: Path) -> None:
    provider.add(Reply(text="too late", delay=FOREVER), text("second turn works"))
    with make_agent(provider, mode, tmp_path) as agent:
        when(lambda: provider.requests, agent.interrupt)
        result = agent.run_conversation(user_message="slow question")
        assert result["interrupted"] and result["turn_exit_reason"] == "interrupted"
        assert all(m["role"] != "assistant" for m in result["messages"])
        follow_up = agent.run_conversation(user_message="are you there?")
    assert follow_up["final_response"] == "second turn works"
    assert provider.invalid_requests == []


def test_interrupt_during_tools(provider: ScriptedProvider, mode: str, tmp_path: Path) -> None:
    gate, waiting = threading.Event(), threading.Event()

    @tool
    def wait_for_gate() -> str:
        """Block until the test opens the gate."""
        waiting.set()
        gate.wait(300)
        return "gate opened"

    provider.add(
        Reply(tool_calls=[ScriptedCall("wait_for_gate", {})]),
        text("after interrupt"),
    )
    with make_agent(provider, mode, tmp_path, tools=[wait_for_gate]) as agent:

        def interrupt_while_waiting() -> None:
            waiting.wait(300)
            agent.interrupt()

        threading.Thread(target=interrupt_while_waiting, daemon=True).start()
        result = agent.run_conversation(user_message="wait")
        gate.set()
        assert result["interrupted"]
        (interrupted,) = tool_results(result)
        assert interrupted.startswith("Interrupted")
        follow_up = agent.run_conversation(user_message="next")
    assert follow_up["final_response"] == "after interrupt"
    assert provider.invalid_requests == []


def test_broken_history_is_repaired_before_sending(
    provider: ScriptedProvider, mode: str, tmp_path: Path
) -> None:
    broken = [
        {"role": "user", "content": "one"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_orphan",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_nobody", "content": "stray result"},
        {"role": "user", "content": "two"},
        {"role": "user", "content": "three"},
    ]
    provider.add(text("repaired fine"))
    with make_agent(provider, mode, tmp_path) as agent:
        result = agent.run_conversation(user_message="four", conversation_history=broken)
    assert result["final_response"] == "repaired fine"
    assert provider.invalid_requests == []
    assert broken[2]["content"] == "stray result", "the caller's history must not be mutated"


def test_stream_deltas_join_to_the_final_text(
    provider: ScriptedProvider, mode: str, tmp_path: Path
) -> None:
    answer = "Streaming works across many small chunks of text."
    provider.add(Reply(text=answer, chunk_size=3, reasoning="thinking it through"))
    deltas: list[str] = []
    reasoning: list[str] = []
    with make_agent(
        provider,
        mode,
        tmp_path,
        stream_delta_callback=deltas.append,
        reasoning_callback=reasoning.append,
    ) as agent:
        result = agent.run_conversation(user_message="stream please")
    assert len(deltas) > 3
    assert "".join(deltas) == answer == result["final_response"]
    assert "thinking it through" in "".join(reasoning)
    assert result["messages"][-1].get("reasoning") == "thinking it through"


def test_session_is_stored_and_resumes(
    provider: ScriptedProvider, mode: str, tmp_path: Path
) -> None:
    provider.add(text("first answer"), text("second answer"))
    with make_agent(provider, mode, tmp_path) as agent:
        agent.run_conversation(user_message="remember me")
        session_id = agent.session_id
    with make_agent(provider, mode, tmp_path, session_id=session_id) as resumed:
        result = resumed.run_conversation(user_message="again")
    assert result["session_id"] == session_id
    contents = [m["content"] for m in result["messages"]]
    assert contents == ["remember me", "first answer", "again", "second answer"]
    assert provider.invalid_requests == []


def test_dangerous_command_without_approver_is_denied(
    provider: ScriptedProvider, mode: str, tmp_path: Path
) -> None:
    victim = tmp_path / "keep"
    victim.mkdir()
    provider.add(
        calls(("terminal", {"command": f"rm -rf {victim}"})),
        text("could not"),
    )
    with make_agent(provider, mode, tmp_path, toolsets=["terminal"], tools=[]) as agent:
        result = agent.run_conversation(user_message="delete it")
    (denied,) = tool_results(result)
    assert denied.startswith("Denied")
    assert victim.exists()
