"""The library surface a user meets first: the tools an agent offers, keyword arguments, and
one turn as an async stream of typed events."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import talaria
from helpers import add, base_url, run_python
from talaria import Agent
from talaria.core import TurnResult
from talaria.events import (
    ClarifyRequested,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnFinished,
    TurnStarted,
)
from talaria.testing import Reply, calls, text
from talaria.testing.server import ScriptedProvider


def _agent(provider: ScriptedProvider, home: Path, **kwargs: object) -> Agent:
    return Agent(
        model="scripted-model",
        api_key="test-key",
        base_url=base_url(provider, "chat_completions"),
        home=home,
        cwd=home,
        config={"context.engine": "none"},
        **kwargs,  # type: ignore[arg-type]
    )


def _offered(provider: ScriptedProvider) -> list[str]:
    body = provider.requests[-1].body
    return [tool["function"]["name"] for tool in body.get("tools") or []]


def test_an_agent_given_tools_offers_exactly_those(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(text("5"))
    with _agent(provider, tmp_path, tools=[add]) as agent:
        agent.chat("2+3?")
        assert list(agent.tools) == ["add"]
    assert _offered(provider) == ["add"]


def test_an_agent_without_tools_or_toolsets_offers_the_built_ins(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(text("hi"))
    with _agent(provider, tmp_path) as agent:
        agent.chat("hello")
    offered = _offered(provider)
    assert {"terminal", "read_file", "write_file", "todo"} <= set(offered)


def test_toolsets_next_to_tools_add_those_built_ins(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(text("ok"))
    with _agent(provider, tmp_path, tools=[add], toolsets=["todo"]) as agent:
        agent.chat("plan")
    assert _offered(provider) == ["todo", "add"]


def test_the_package_offers_the_agent_its_tools_and_the_turn_result() -> None:
    public = {
        "AIAgent",
        "Agent",
        "ConfigError",
        "Tool",
        "ToolContext",
        "ToolError",
        "TurnFailed",
        "TurnResult",
        "__version__",
        "tool",
    }
    assert set(talaria.__all__) == public
    assert talaria.TurnResult is TurnResult
    assert {name for name in public if getattr(talaria, name, None) is None} == set()
    with pytest.raises(AttributeError):
        _ = talaria.NoSuchName  # type: ignore[attr-defined]


def test_importing_talaria_loads_no_part_of_the_engine(tmp_path: Path) -> None:
    loaded = run_python(
        "import sys, talaria; print(sorted(m for m in sys.modules if m.startswith('talaria')))",
        cwd=tmp_path,
    )
    assert loaded.strip() == "['talaria']"


def test_everything_after_model_is_a_keyword(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        Agent("gpt-4.1", "openai")  # type: ignore[misc]


async def test_a_turn_is_one_stream_of_typed_events(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(calls(("add", {"a": 2, "b": 3})), text("The sum is 5."))
    agent = _agent(provider, tmp_path, tools=[add])
    try:
        turn = agent.events("2+3?")
        seen = [event async for event in turn]
    finally:
        await agent.aclose()
    kinds = [type(event) for event in seen]
    assert kinds[0] is TurnStarted and kinds[-1] is TurnFinished
    assert kinds.index(ToolStarted) < kinds.index(ToolFinished) < kinds.index(TurnFinished)
    finished = [event for event in seen if isinstance(event, ToolFinished)]
    assert [event.name for event in finished] == ["add"]
    streamed = "".join(event.text for event in seen if isinstance(event, TextDelta))
    assert streamed == "The sum is 5."
    assert turn.result is not None
    assert turn.result["final_response"] == "The sum is 5."
    assert turn.result["turn_exit_reason"] == "text_response"


async def test_leaving_the_stream_early_interrupts_the_turn(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(Reply(text="a long answer " * 50, chunk_delay=0.05), text("second"))
    agent = _agent(provider, tmp_path)
    try:
        turn = agent.events("talk")
        stream = turn.__aiter__()
        async for event in stream:
            if isinstance(event, TextDelta):
                break
        await stream.aclose()  # type: ignore[attr-defined]
        assert turn.result is None
        # the agent is free again: the interrupted turn ended cleanly
        second = await asyncio.wait_for(agent.arun_conversation("again"), timeout=60)
    finally:
        await agent.aclose()
    assert second["final_response"] == "second"
    history = second["messages"]
    assert [m["role"] for m in history].count("user") == 2


@pytest.mark.parametrize("answers", [("clarify",), ()])
async def test_a_stream_that_answers_questions_is_offered_clarify(
    provider: ScriptedProvider, tmp_path: Path, answers: tuple[str, ...]
) -> None:
    """A new agent is assembled when its first stream starts, after the stream has said
    what it answers: clarify is offered exactly when someone will answer it."""
    provider.add(calls(("clarify", {"question": "Which colour?"})), text("Blue it is."))
    agent = _agent(provider, tmp_path)  # the built-in toolsets: clarify where it can work
    try:
        turn = agent.events("paint it", answers=answers)
        async for event in turn:
            if isinstance(event, ClarifyRequested):
                agent.respond(event.request_id, "blue")
    finally:
        await agent.aclose()
    assert turn.result is not None
    tool_results = [m["content"] for m in turn.result["messages"] if m["role"] == "tool"]
    first = provider.requests[0].body
    offered = [tool["function"]["name"] for tool in first.get("tools") or []]
    if answers:
        assert "clarify" in offered and "blue" in tool_results[0]
    else:
        assert "clarify" not in offered and tool_results[0].startswith("Error:")
