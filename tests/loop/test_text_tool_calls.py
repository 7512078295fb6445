"""Tool calls written as text by small local models run as tool calls, in every shape such models
write them; a call to an unknown tool or with broken arguments reaches the model as an error it
can act on; raw call JSON is never the answer and never streams to the screen. Driven through a
real Agent, the scripted HTTP provider and the real `talaria` program."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from helpers import MODES, scripted_agent, tool_results
from pty_terminal import TALARIA
from talaria.events import Notice, TextDelta, ToolFinished
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
    "function wrapper": '{"function": {"name": "add", "arguments": {"a": 2, "b": 40}}}',
    # What Qwen2.5-Coder 0.5B and 1.5B wrote on llama.cpp (issue 27):
    "prose around a fence": (
        f"To add the numbers I will use the tool:\n```json\n{CALL}\n```\nThis returns the sum."
    ),
    "a long explanation before the JSON": (
        "Tools are described by JSON objects. Each has a name and arguments.\n\n"
        f"So here is the call:\n```json\n{CALL}\n```"
    ),
    "inline in a sentence": f"The call {CALL} adds them.",
    "python literals": "{'name': 'add', 'arguments': {'a': 2, 'b': 40}}",
    "python words in json": '{"name": "add", "arguments": {"a": 2, "b": 40}, "id": None}',
    "qwen tag with python literals": "<tool_call>\n{'name': 'add', 'arguments': {'a': 2, 'b': 40}}"
    "\n</tool_call>",
    # Qwen2.5-Coder 0.5B copying a line of the tool's schema into its arguments:
    "the schema's additionalProperties copied in": (
        '{"name": "add", "arguments": {"a": 2, "b": 40, "additionalProperties": false}}'
    ),
}

SEVERAL = {
    "two objects in one fence": f"```json\n{CALL}\n{CALL}\n```",
    "two fences": f"```json\n{CALL}\n```\n```json\n{CALL}\n```",
    "two qwen tags": f"<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n{CALL}\n</tool_call>",
    "a json array": f"[{CALL}, {CALL}]",
    "two bare objects after prose": f"First I add, then I add again.\n{CALL}\n{CALL}",
}

ANSWERS = {
    "plain data": '{"name": "Alice", "age": 30}',
    "a code block": "Here it is:\n```python\nprint({'a': 1})\n```\nRun it with python.",
    "braces in prose": "A set is written {1, 2} and a dict {'a': 1}.",
    "an empty object": "The arguments were {} this time.",
}


def run(
    tmp_path: Path, answer: str, **kwargs: Any
) -> tuple[dict[str, Any], list[Any], ScriptedProvider]:
    events: list[Any] = []
    with ScriptedProvider([text(answer), text("the sum is 42")]) as server:
        agent = scripted_agent(server, tmp_path, event_callback=events.append, **kwargs)
        with agent:
            result = agent.run_conversation("What is 2 + 40? Use the tool.")
        assert server.invalid_requests == []
        return result, events, server


def streamed(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.mark.parametrize("form", list(WRITTEN_CALLS))
def test_a_call_written_as_text_runs_the_tool(tmp_path: Path, form: str) -> None:
    result, events, _ = run(tmp_path, WRITTEN_CALLS[form])
    assert tool_results(result) == ["42"]
    said_first = result["messages"][1].get("content")  # the prose around the call, if any
    assert result["final_response"] == (f"{said_first}\n\n" if said_first else "") + (
        "the sum is 42"  # every step's text
    )
    assert [e.name for e in events if isinstance(e, ToolFinished)] == ["add"]
    assert any(isinstance(e, Notice) and "wrote as text" in e.message for e in events)
    call_message = result["messages"][1]
    assert call_message["tool_calls"][0]["function"]["name"] == "add"
    assert '"add"' not in str(call_message.get("content"))
    assert "{" not in streamed(events) and "tool_call" not in streamed(events)


@pytest.mark.parametrize("form", list(SEVERAL))
def test_several_calls_in_one_answer_all_run(tmp_path: Path, form: str) -> None:
    result, _, _ = run(tmp_path, SEVERAL[form])
    assert tool_results(result) == ["42", "42"]
    assert result["final_response"].endswith("the sum is 42")
    assert "{" not in result["final_response"]


def test_the_prose_around_a_call_stays_with_the_step_but_the_json_never_streams(
    tmp_path: Path,
) -> None:
    result, events, _ = run(tmp_path, WRITTEN_CALLS["prose around a fence"])
    assert result["messages"][1]["content"] == (
        "To add the numbers I will use the tool:\n\nThis returns the sum."
    )
    shown = streamed(events)
    assert shown == result["final_response"]  # "This returns the sum." included
    assert "{" not in shown and "```" not in shown


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("form", list(WRITTEN_CALLS))
def test_the_streamed_text_is_the_final_answer_whatever_the_shape_of_the_call(
    tmp_path: Path, form: str, mode: str
) -> None:
    """The screen shows what the answer keeps, separated as it is: no stray line breaks from
    before a call, no prose after a call left out."""
    answer = WRITTEN_CALLS[form].replace("\n{", "\n\n{") + "\nThen 42."
    result, events, _ = run(tmp_path, answer, mode=mode)
    assert tool_results(result) == ["42"]
    assert streamed(events) == result["final_response"]


@pytest.mark.parametrize("case", list(ANSWERS))
def test_an_answer_that_is_not_a_call_stays_the_answer_and_streams_whole(
    tmp_path: Path, case: str
) -> None:
    result, events, server = run(tmp_path, ANSWERS[case])
    assert tool_results(result) == []
    assert result["final_response"] == ANSWERS[case]
    assert streamed(events) == ANSWERS[case]
    assert len(server.requests) == 1


def test_a_call_to_a_tool_that_was_not_offered_is_answered_with_the_tools_there_are(
    tmp_path: Path,
) -> None:
    result, _, server = run(tmp_path, '{"name": "multiply", "arguments": {"a": 2, "b": 40}}')
    [error] = tool_results(result)
    assert "unknown tool 'multiply'" in error and "add" in error
    assert result["final_response"] == "the sum is 42"
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    "answer",
    [
        '{"name": "add", "arguments": {"a": "two", "b": 40}}',
        '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 4',
        '```json\n{"name": "add", "arguments": {"a": 2 "b": 40}}\n```',
    ],
    ids=["wrong type", "cut off", "broken json"],
)
def test_a_call_with_arguments_that_do_not_fit_gets_an_error_not_an_answer(
    tmp_path: Path, answer: str
) -> None:
    result, events, _ = run(tmp_path, answer)
    [error] = tool_results(result)
    assert "invalid arguments for add" in error
    assert result["final_response"] == "the sum is 42"
    assert "{" not in streamed(events)


@pytest.mark.parametrize("mode", MODES)
def test_calls_written_before_the_output_limit_cut_the_answer_run(
    tmp_path: Path, mode: str
) -> None:
    """What Qwen2.5-Coder 0.5B wrote on llama.cpp after a first tool result: the right call,
    then copies until the output limit. Before, nothing ran and the model was asked again
    ("make the call again with shorter arguments"), and it wrote a file instead. Now the
    calls whose text closed run; the cut-off copy is dropped and never shown."""
    cut = f"```json\n{CALL}\n{CALL}\n" + '{"name": "add", "arguments": {"a'
    events: list[Any] = []
    script = [text(cut, finish_reason="length"), text("the sum is 42")]
    with ScriptedProvider(script) as server:
        agent = scripted_agent(server, tmp_path, mode, event_callback=events.append)
        with agent:
            result = agent.run_conversation("What is 2 + 40? Use the tool.")
    assert tool_results(result) == ["42", "42"]
    assert result["final_response"] == "the sum is 42" == streamed(events)
    assert len(server.requests) == 2
    assert "cut off" not in str(server.requests[-1].body)


def test_an_answer_cut_off_inside_its_only_call_is_still_asked_again(tmp_path: Path) -> None:
    """No call closed before the cut: nothing runs, the call is asked for again."""
    cut = '```json\n{"name": "add", "arguments": {"a": 2, "b": 4'
    script = [text(cut, finish_reason="length"), text(CALL), text("42")]
    with ScriptedProvider(script) as server, scripted_agent(server, tmp_path) as agent:
        result = agent.run_conversation("What is 2 + 40? Use the tool.")
    assert tool_results(result) == ["42"]
    assert "cut off by the output limit" in str(server.requests[1].body)


def test_recognition_can_be_turned_off(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, CALL, config={"tools.text_calls": False})
    assert tool_results(result) == [] and result["final_response"] == CALL


def test_the_big_apis_are_left_alone(tmp_path: Path) -> None:
    result, events, _ = run(tmp_path, CALL, provider="openai")
    assert tool_results(result) == [] and result["final_response"] == CALL
    assert streamed(events) == CALL


def test_talaria_p_runs_a_call_the_model_wrote_as_text_and_prints_only_the_answer(
    tmp_path: Path,
) -> None:
    """Before: exit 0 with the raw JSON on stdout (issue 27)."""
    answer = (
        "I'll write the file.\n```json\n"
        "{'name': 'write_file', 'arguments': {'path': 'hello.txt', 'content': 'hi'}}\n```\n"
        "Then the file exists."
    )
    with ScriptedProvider([text(answer), text("Wrote hello.txt.")]) as server:
        env = {**os.environ, "TALARIA_HOME": str(tmp_path / "home")}
        url = server.openai_base_url
        done = subprocess.run(
            [TALARIA, "-p", "write hi", "-m", "m", "--base-url", url, "--toolsets", "file"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "hello.txt").read_text() == "hi"
    assert "write_file" not in done.stdout and "{" not in done.stdout
    assert done.stdout.strip().endswith("Wrote hello.txt.")
