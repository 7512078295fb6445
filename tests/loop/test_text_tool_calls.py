"""Tool calls written as text by small local models run as tool calls; prose that only shows
JSON stays an answer. Driven through a real Agent and the scripted HTTP provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers import scripted_agent, tool_results
from talaria.events import Notice, ToolFinished
from talaria.testing import ScriptedProvider, text

CALL = '{"name": "add", "arguments": {"a": 2, "b": 40}}'

WRITTEN_CALLS = {
    "fenced": f"```json\n{CALL}\n```",
    "fenced after a lead-in": f"I'll add the two numbers:\n```json\n{CALL}\n```",
    "bare": CALL,
    "qwen": f"<tool_call>\n{CALL}\n</tool_call>",
    "llama": '{"name": "add", "parameters": {"a": 2, "b": 40}}',
    "llama python tag": '<|python_tag|>{"name": "add", "parameters": {"a": "2", "b": 40}}',
    "mistral": f"[TOOL_CALLS] [{CALL}]",
    "mistral named": '[TOOL_CALLS]add[ARGS]{"a": 2, "b": 40}',
    "openai shape": '{"type": "function", "function": {"name": "add", "arguments": "{\\"a\\": 2, '
    '\\"b\\": 40}"}}',
}

PROSE = {
    "an example inside an explanation": (
        f"To add numbers you could call the tool like this:\n```json\n{CALL}\n```\n"
        "and it would return 42."
    ),
    "a long explanation before the JSON": (
        "Tools are described by JSON objects. Each has a name and arguments.\n\n"
        f"For example:\n```json\n{CALL}\n```"
    ),
    "json inline in a sentence": f"The call {CALL} would add them.",
    "a tool that was not offered": '{"name": "multiply", "arguments": {"a": 2, "b": 40}}',
    "arguments that do not fit": '{"name": "add", "arguments": {"a": "two", "b": 40}}',
    "plain data": '{"name": "Alice", "age": 30}',
    "two fenced blocks": f"```json\n{CALL}\n```\n```json\n{CALL}\n```",
}


def run(tmp_path: Path, answer: str, **kwargs: Any) -> tuple[dict[str, Any], list[Any], Any]:
    events: list[Any] = []
    with ScriptedProvider([text(answer), text("the sum is 42")]) as server:
        agent = scripted_agent(server, tmp_path, event_callback=events.append, **kwargs)
        with agent:
            result = agent.run_conversation("What is 2 + 40? Use the tool.")
        assert server.invalid_requests == []
        return result, events, server


@pytest.mark.parametrize("form", list(WRITTEN_CALLS))
def test_a_call_written_as_text_runs_the_tool(tmp_path: Path, form: str) -> None:
    result, events, _ = run(tmp_path, WRITTEN_CALLS[form])
    assert tool_results(result) == ["42"]
    said_first = "I'll add the two numbers:\n\n" if form == "fenced after a lead-in" else ""
    assert result["final_response"] == said_first + "the sum is 42"  # every step's text
    assert [e.name for e in events if isinstance(e, ToolFinished)] == ["add"]
    assert any(isinstance(e, Notice) and "wrote as text" in e.message for e in events)
    call_message = result["messages"][1]
    assert call_message["tool_calls"][0]["function"]["name"] == "add"
    assert CALL not in str(call_message.get("content"))


@pytest.mark.parametrize("case", list(PROSE))
def test_prose_that_shows_json_stays_the_answer(tmp_path: Path, case: str) -> None:
    result, _, server = run(tmp_path, PROSE[case])
    assert tool_results(result) == []
    assert result["final_response"] == PROSE[case]
    assert len(server.requests) == 1


def test_recognition_can_be_turned_off(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, CALL, config={"tools.text_calls": False})
    assert tool_results(result) == [] and result["final_response"] == CALL


def test_the_big_apis_are_left_alone(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, CALL, provider="openai")
    assert tool_results(result) == [] and result["final_response"] == CALL
