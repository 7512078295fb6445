"""The scripted Responses wire: rejects what the real API rejects, answers in its real shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from talaria.testing.script import Reply, ScriptedCall
from talaria.testing.wire_responses import WIRE, encrypt_reasoning

TOOL = {"type": "function", "name": "read", "parameters": {"type": "object"}, "strict": False}


def body(*items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-5", "input": list(items), "store": False, **extra}


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def call(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "read", "arguments": "{}"}


def output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "ok"}


def reasoning(encrypted: str | None) -> dict[str, Any]:
    return {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": encrypted}


def events(frames: list[bytes]) -> list[dict[str, Any]]:
    parsed = []
    for frame in frames:
        head, data = frame.decode().strip().split("\n")
        event = json.loads(data.removeprefix("data: "))
        assert head == f"event: {event['type']}"
        parsed.append(event)
    return parsed


def test_a_complete_tool_conversation_is_valid() -> None:
    assert (
        WIRE.validate(
            body(
                user("read it"),
                reasoning(encrypt_reasoning("plan")),
                call("c1"),
                call("c2"),
                output("c1"),
                output("c2"),
                {"role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
                user("thanks"),
                instructions="be brief",
                tools=[TOOL],
                include=["reasoning.encrypted_content"],
            )
        )
        == []
    )


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ([user("hi"), output("c9")], "No tool call found for function call output with call_id c9"),
        ([user("hi"), call("c1"), user("again")], "No tool output found for function call c1"),
        ([user("hi"), call("c1")], "No tool output found for function call c1"),
        ([user("hi"), call("c1"), call("c1"), output("c1")], "Duplicate value"),
        ([{"role": "tool", "tool_call_id": "c1", "content": "x"}], "Unknown parameter"),
        (
            [{"role": "assistant", "content": None, "tool_calls": []}],
            "Unknown parameter: 'input[0].tool_calls'",
        ),
        ([{"role": "user", "content": [{"type": "output_text", "text": "x"}]}], "Supported"),
        ([{"role": "assistant", "content": [{"type": "input_text", "text": "x"}]}], "Supported"),
        ([user("hi"), reasoning(None), call("c1"), output("c1")], "not persisted"),
        ([user("hi"), reasoning("forged"), call("c1"), output("c1")], "could not be verified"),
        ([user("hi"), reasoning(encrypt_reasoning("x")), user("x")], "required following item"),
        ([{"type": "item_reference", "id": "msg_1"}], "Invalid value: 'item_reference'"),
    ],
)
def test_invalid_inputs_are_rejected_like_the_real_api(
    items: list[dict[str, Any]], expected: str
) -> None:
    errors = WIRE.validate(body(*items))
    assert any(expected in error for error in errors), errors


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"messages": []}, "Unknown parameter: 'messages'"),
        ({"previous_response_id": "resp_1"}, "not found"),
        ({"tools": [{"type": "function", "function": {"name": "read"}}]}, "tools[0].function"),
        ({"tools": [{**TOOL, "name": "bad name"}]}, "does not match"),
        ({"include": ["reasoning.everything"]}, "include[0]"),
        ({"reasoning": {"effort": "extreme"}}, "reasoning.effort"),
    ],
)
def test_invalid_parameters_are_rejected(extra: dict[str, Any], expected: str) -> None:
    errors = WIRE.validate(body(user("hi"), **extra))
    assert any(expected in error for error in errors), errors


def test_render_is_a_response_the_sdk_accepts() -> None:
    reply = Reply(
        text="hi",
        reasoning="thought",
        tool_calls=[ScriptedCall("read", {"path": "a"}, id="c1")],
        usage={
            "input_tokens": 10,
            "cache_read_tokens": 30,
            "output_tokens": 7,
            "reasoning_tokens": 2,
        },
    )
    rendered = WIRE.render(reply, body(user("x"), include=["reasoning.encrypted_content"]))

    response = Response.model_validate(rendered)

    assert response.status == "completed"
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    assert response.output_text == "hi"
    assert rendered["output"][0]["encrypted_content"] == encrypt_reasoning("thought")
    assert rendered["output"][2]["call_id"] == "c1"
    assert rendered["output"][2]["arguments"] == '{"path": "a"}'
    usage = rendered["usage"]
    assert usage["input_tokens"] == 40  # OpenAI counts cached tokens inside input_tokens
    assert usage["input_tokens_details"]["cached_tokens"] == 30
    assert usage["output_tokens_details"]["reasoning_tokens"] == 2
    assert usage["total_tokens"] == 47


def test_encrypted_reasoning_only_when_included() -> None:
    rendered = WIRE.render(Reply(text="hi", reasoning="thought"), body(user("x")))
    assert rendered["output"][0]["summary"][0]["text"] == "thought"
    assert rendered["output"][0]["encrypted_content"] is None


def test_stream_is_the_real_event_sequence() -> None:
    reply = Reply(
        text="hello world",
        reasoning="think",
        tool_calls=[ScriptedCall("read", {"p": 1}, id="c1")],
        chunk_size=4,
    )
    parsed = events(WIRE.render_stream(reply, body(user("x"))))
    adapter: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
    for event in parsed:
        adapter.validate_python(event)

    types = [event["type"] for event in parsed]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    assert [e["sequence_number"] for e in parsed] == list(range(len(parsed)))
    assert {e["response"]["id"] for e in parsed if "response" in e} == {parsed[0]["response"]["id"]}
    text = "".join(e["delta"] for e in parsed if e["type"] == "response.output_text.delta")
    summary = "".join(
        e["delta"] for e in parsed if e["type"] == "response.reasoning_summary_text.delta"
    )
    arguments = "".join(
        e["delta"] for e in parsed if e["type"] == "response.function_call_arguments.delta"
    )
    assert (text, summary, arguments) == ("hello world", "think", '{"p": 1}')
    assert (
        types.count("response.output_item.added") == types.count("response.output_item.done") == 3
    )
    assert parsed[-1]["response"]["usage"]["output_tokens"] > 0


def test_truncated_reply_ends_incomplete() -> None:
    parsed = events(WIRE.render_stream(Reply(text="cut", finish_reason="length"), body(user("x"))))
    final = parsed[-1]
    assert final["type"] == "response.incomplete"
    assert final["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_refusal_is_a_refusal_part() -> None:
    rendered = WIRE.render(Reply(refusal="I can't help with that."), body(user("x")))
    assert rendered["output"][0]["content"] == [
        {"type": "refusal", "refusal": "I can't help with that."}
    ]


def test_error_body_has_openai_shape() -> None:
    assert WIRE.error_body(429, "slow down") == {
        "error": {
            "message": "slow down",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    assert WIRE.error_body(503, "down")["error"]["type"] == "server_error"
