"""The scripted Anthropic Messages wire: as strict as the real API, and readable by its SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from talaria.testing.script import Fail, Reply, ScriptedCall
from talaria.testing.server import ScriptedProvider
from talaria.testing.wire_anthropic import WIRE, AnthropicWire

TOOL = {"name": "read_file", "description": "Read a file", "input_schema": {"type": "object"}}


def body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "claude-test", "max_tokens": 100, "messages": messages, **extra}


def user(*content: Any) -> dict[str, Any]:
    single_string = len(content) == 1 and isinstance(content[0], str)
    return {"role": "user", "content": content[0] if single_string else list(content)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": value, **extra}


def tool_use(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "read_file", "input": {"path": "a"}}


def tool_result(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "ok"}


def errors_of(request: dict[str, Any]) -> str:
    return " | ".join(AnthropicWire().validate(request))


def test_a_well_formed_tool_conversation_is_valid() -> None:
    request = body(
        [
            user("read a"),
            assistant(text("reading"), tool_use("t1"), tool_use("t2")),
            user(tool_result("t1"), tool_result("t2"), text("and then?")),
        ],
        system=[text("be brief")],
        tools=[TOOL],
    )
    assert AnthropicWire().validate(request) == []


@pytest.mark.parametrize(
    ("request_body", "expected"),
    [
        ({"model": "m", "messages": [user("hi")]}, "max_tokens: Field required"),
        (body([user("hi")], max_tokens=0), "max_tokens"),
        (body([{"role": "system", "content": "x"}, user("hi")]), 'Unexpected role "system"'),
        (body([assistant(text("hello"))]), 'first message must use the "user" role'),
        (body([user("a"), user("b")]), 'multiple "user" roles in a row'),
        (body([user(text(""))]), "text content blocks must be non-empty"),
        (body([user("")]), "must have non-empty content"),
        (body([user("hi")], system=[text("")]), "text content blocks must be non-empty"),
        (
            body([user("x"), assistant(tool_use("t1")), user(text("no result"))], tools=[TOOL]),
            "`tool_use` ids were found without `tool_result` blocks",
        ),
        (
            body(
                [user("x"), assistant(tool_use("t1")), user(text("first"), tool_result("t1"))],
                tools=[TOOL],
            ),
            "`tool_result` blocks must come first",
        ),
        (
            body([user("x"), assistant(text("no call")), user(tool_result("t9"))], tools=[TOOL]),
            "unexpected `tool_use_id`",
        ),
        (
            body([user("x"), assistant(tool_use("t1")), user(tool_result("t1"))]),
            "must define tools",
        ),
        (
            body(
                [user("x"), assistant(tool_use("call|1")), user(tool_result("call|1"))],
                tools=[TOOL],
            ),
            "tool_use.id: String should match pattern",
        ),
        (
            body([user("hi")], tools=[{"type": "function", "function": {"name": "x"}}]),
            "Extra inputs are not permitted",
        ),
        (
            body([user("hi")], tools=[{**TOOL, "name": "has space"}]),
            "name: String should match pattern",
        ),
        (
            body(
                [user("q"), assistant({"type": "thinking", "thinking": "t", "signature": "forged"})]
            ),
            "Invalid signature in thinking block",
        ),
        (
            body([user(text("a", cache_control={"type": "persistent"}))]),
            "cache_control: Input should be",
        ),
    ],
)
def test_rejects_what_the_real_api_rejects(request_body: dict[str, Any], expected: str) -> None:
    assert expected in errors_of(request_body)


def test_at_most_four_cache_markers_counted_across_tools_system_and_messages() -> None:
    marker = {"cache_control": {"type": "ephemeral"}}
    four = body(
        [user(text("a", **marker)), assistant(text("b", **marker)), user(text("c", **marker))],
        system=[text("s", **marker)],
    )
    assert errors_of(four) == ""
    five = {**four, "tools": [{**TOOL, **marker}]}
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in errors_of(five)


def test_a_signature_the_server_issued_replays() -> None:
    wire = AnthropicWire()
    message = wire.render(Reply(text="answer", reasoning="let me think"), body([user("q")]))
    thinking, answer = message["content"]
    assert thinking["type"] == "thinking" and thinking["thinking"] == "let me think"
    replay = body([user("q"), assistant(thinking, answer), user("more")])
    assert wire.validate(replay) == []
    assert "Invalid signature" in " ".join(AnthropicWire().validate(replay))


def test_render_is_a_message_with_anthropic_usage_and_stop_reasons() -> None:
    usage = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_read_tokens": 7,
        "cache_write_tokens": 3,
    }
    message = WIRE.render(Reply(text="hi", usage=usage), body([user("q")]))
    assert message["type"] == "message" and message["role"] == "assistant"
    assert message["content"] == [{"type": "text", "text": "hi"}]
    assert message["stop_reason"] == "end_turn"
    assert message["usage"] == {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_creation_input_tokens": 3,
        "cache_read_input_tokens": 7,
    }
    calls = WIRE.render(Reply(tool_calls=[ScriptedCall("f", {"a": 1}, id="t1")]), body([user("q")]))
    assert calls["content"] == [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]
    assert calls["stop_reason"] == "tool_use"
    assert (
        WIRE.render(Reply(text="cut", finish_reason="length"), body([user("q")]))["stop_reason"]
        == "max_tokens"
    )
    assert WIRE.render(Reply(refusal="I can't help"), body([user("q")]))["stop_reason"] == "refusal"


def frames_of(raw: list[bytes]) -> Iterator[tuple[str, dict[str, Any]]]:
    for frame in raw:
        event_line, data_line = frame.decode().strip().split("\n")
        assert event_line.startswith("event: ") and data_line.startswith("data: ")
        yield event_line[7:], json.loads(data_line[6:])


def test_stream_is_the_real_event_sequence() -> None:
    reply = Reply(
        text="hello world",
        reasoning="hmm",
        tool_calls=[ScriptedCall("f", {"path": "x"}, id="t1")],
        chunk_size=4,
    )
    events = list(frames_of(WIRE.render_stream(reply, body([user("q")]))))
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert all(name == data["type"] for name, data in events)
    deltas = [data["delta"]["type"] for name, data in events if name == "content_block_delta"]
    assert deltas.count("signature_delta") == 1
    assert {"thinking_delta", "text_delta", "input_json_delta"} <= set(deltas)
    text_parts = [
        d["delta"]["text"] for n, d in events if d.get("delta", {}).get("type") == "text_delta"
    ]
    assert "".join(text_parts) == "hello world" and len(text_parts) == 3
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_error_body_uses_anthropic_error_types() -> None:
    assert WIRE.error_body(529, "busy") == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "busy"},
    }
    assert WIRE.error_body(429, "slow")["error"]["type"] == "rate_limit_error"
    assert WIRE.error_body(400, "bad")["error"]["type"] == "invalid_request_error"


def test_cache_is_simulated_so_markers_show_up_in_usage() -> None:
    wire = AnthropicWire()
    marker = {"cache_control": {"type": "ephemeral"}}
    first = body([user(text("question " * 50, **marker))], system=[text("system " * 200, **marker)])
    second = body(
        [
            user(text("question " * 50)),
            assistant(text("answer")),
            user(text("follow-up", **marker)),
        ],
        system=[text("system " * 200, **marker)],
    )
    written = wire.render(Reply(text="a"), first)["usage"]
    assert written["cache_creation_input_tokens"] > 0 and written["cache_read_input_tokens"] == 0
    read = wire.render(Reply(text="b"), second)["usage"]
    assert read["cache_read_input_tokens"] >= written["cache_creation_input_tokens"]


# ------------------------------------------------- through the official SDK and a real server


@pytest.fixture
def anthropic() -> ModuleType:
    """The official SDK, imported by the tests that use it: its import takes a second or more,
    which every pytest-xdist worker would otherwise pay while collecting this file."""
    import anthropic

    return anthropic


def test_the_official_sdk_reads_the_non_streaming_answer(anthropic: ModuleType) -> None:
    reply = Reply(text="hi there", tool_calls=[ScriptedCall("read_file", {"path": "a"})])
    with ScriptedProvider([reply]) as provider:
        client = anthropic.Anthropic(
            base_url=provider.anthropic_base_url, api_key="k", max_retries=0
        )
        message = client.messages.create(
            model="claude-test",
            max_tokens=50,
            messages=[{"role": "user", "content": "hi"}],
            tools=[TOOL],  # type: ignore[list-item]
        )
        client.close()
    assert message.content[0].type == "text" and message.content[0].text == "hi there"
    assert message.content[1].type == "tool_use" and message.content[1].input == {"path": "a"}
    assert message.stop_reason == "tool_use"


def test_the_official_sdk_assembles_the_stream(anthropic: ModuleType) -> None:
    reply = Reply(
        text="streamed answer",
        reasoning="thinking it over",
        tool_calls=[ScriptedCall("read_file", {"path": "a.txt"})],
        chunk_size=3,
    )
    with ScriptedProvider([reply]) as provider:
        client = anthropic.Anthropic(
            base_url=provider.anthropic_base_url, api_key="k", max_retries=0
        )
        with client.messages.stream(
            model="claude-test",
            max_tokens=50,
            messages=[{"role": "user", "content": "hi"}],
            tools=[TOOL],  # type: ignore[list-item]
        ) as stream:
            message = stream.get_final_message()
        client.close()
    kinds = [block.type for block in message.content]
    assert kinds == ["thinking", "text", "tool_use"]
    assert message.content[0].thinking == "thinking it over"  # type: ignore[union-attr]
    assert message.content[0].signature  # type: ignore[union-attr]
    assert message.content[1].text == "streamed answer"  # type: ignore[union-attr]
    assert message.content[2].input == {"path": "a.txt"}  # type: ignore[union-attr]


def test_the_official_sdk_raises_its_own_errors_for_our_error_bodies(anthropic: ModuleType) -> None:
    with ScriptedProvider(
        [Fail(529, "Overloaded"), Fail(429, "slow down", headers={"retry-after": "2"})]
    ) as provider:
        client = anthropic.Anthropic(
            base_url=provider.anthropic_base_url, api_key="k", max_retries=0
        )
        request: Any = {
            "model": "m",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "x"}],
        }
        with pytest.raises(anthropic.APIStatusError) as overloaded:
            client.messages.create(**request)
        with pytest.raises(anthropic.RateLimitError):
            client.messages.create(**request)
        with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
            client.post("/v1/messages", cast_to=object, body={"model": "m", "messages": []})
        client.close()
    assert overloaded.value.status_code == 529
