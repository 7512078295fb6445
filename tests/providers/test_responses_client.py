"""ResponsesClient end to end: the official openai SDK against the scripted HTTP provider."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from talaria.core import Message, ModelRequest, ModelResponse
from talaria.providers.base import NullStream
from talaria.providers.errors import ErrorKind, ProviderError
from talaria.providers.wire.responses import ResponsesClient
from talaria.testing.script import Drop, Fail, Malformed, Reply, ScriptedCall
from talaria.testing.server import ScriptedProvider

PARAMETERS = {"type": "object", "properties": {"path": {"type": "string"}}}
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} a file",
            "parameters": PARAMETERS,
        },
    }
    for name in ("read", "write")
]


class Recorder:
    """A StreamHandler that remembers everything it was told."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.reasonings: list[str] = []
        self.calls: list[tuple[int, str, str]] = []
        self.arguments: list[tuple[int, str]] = []

    def text(self, delta: str) -> None:
        self.texts.append(delta)

    def reasoning(self, delta: str) -> None:
        self.reasonings.append(delta)

    def tool_call(self, index: int, call_id: str, name: str) -> None:
        self.calls.append((index, call_id, name))

    def tool_arguments(self, index: int, delta: str) -> None:
        self.arguments.append((index, delta))


@pytest.fixture
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider() as server:
        yield server


def client_for(server: ScriptedProvider, model: str = "gpt-5") -> ResponsesClient:
    return ResponsesClient(model, base_url=server.openai_base_url, api_key="sk-test")


def conversation(*messages: Message) -> list[Message]:
    return [{"role": "system", "content": "You are terse."}, *messages]


async def ask(
    client: ResponsesClient, messages: list[Message], stream: bool = True, **kwargs: Any
) -> tuple[ModelResponse, Recorder]:
    recorder = Recorder()
    try:
        response = await client.complete(
            ModelRequest(messages=messages, stream=stream, **kwargs), recorder
        )
    finally:
        await client.aclose()
    return response, recorder


async def test_plain_text_without_streaming(provider: ScriptedProvider) -> None:
    provider.add(Reply(text="Hello!", usage={"input_tokens": 12, "output_tokens": 3}))

    response, recorder = await ask(
        client_for(provider), conversation({"role": "user", "content": "hi"}), stream=False
    )

    assert response.text == "Hello!"
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    assert recorder.texts == []
    sent = provider.requests[0].body
    assert sent["instructions"] == "You are terse."
    assert sent["input"] == [{"type": "message", "role": "user", "content": "hi"}]
    assert sent["store"] is False
    assert sent["stream"] is False


async def test_streamed_text_arrives_in_deltas_that_join_to_the_answer(
    provider: ScriptedProvider,
) -> None:
    provider.add(Reply(text="The quick brown fox jumps over the lazy dog.", chunk_size=5))

    response, recorder = await ask(
        client_for(provider), conversation({"role": "user", "content": "go"})
    )

    assert len(recorder.texts) > 3
    assert (
        "".join(recorder.texts) == response.text == "The quick brown fox jumps over the lazy dog."
    )
    assert provider.requests[0].body["stream"] is True


async def test_parallel_function_calls_keep_their_order(provider: ScriptedProvider) -> None:
    provider.add(
        Reply(
            tool_calls=[
                ScriptedCall("read", {"path": "a.py"}, id="call_a"),
                ScriptedCall("write", {"path": "b.py"}, id="call_b"),
                ScriptedCall("read", {"path": "c.py"}, id="call_c"),
            ]
        )
    )

    response, recorder = await ask(
        client_for(provider), conversation({"role": "user", "content": "edit"}), tools=TOOLS
    )

    assert [(c.id, c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("call_a", "read", {"path": "a.py"}),
        ("call_b", "write", {"path": "b.py"}),
        ("call_c", "read", {"path": "c.py"}),
    ]
    assert recorder.calls == [(0, "call_a", "read"), (1, "call_b", "write"), (2, "call_c", "read")]
    assert response.finish_reason == "tool_calls"
    tools = provider.requests[0].body["tools"]
    assert tools[0] == {
        "type": "function",
        "name": "read",
        "description": "read a file",
        "parameters": PARAMETERS,
        "strict": False,
    }


async def test_tool_results_go_back_as_function_call_outputs(provider: ScriptedProvider) -> None:
    provider.add(Reply(text="Both files are fine."))
    history = conversation(
        {"role": "user", "content": "check"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "read", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "b"}]},
    )

    response, _ = await ask(client_for(provider, "gpt-4.1"), history, tools=TOOLS)

    assert response.text == "Both files are fine."
    assert [item["type"] for item in provider.requests[0].body["input"]] == [
        "message",
        "message",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    assert provider.requests[0].body["input"][-1] == {
        "type": "function_call_output",
        "call_id": "c2",
        "output": "b",
    }
    assert "include" not in provider.requests[0].body  # gpt-4.1 does not reason


async def test_reasoning_is_replayed_next_turn_only_to_the_same_endpoint(
    provider: ScriptedProvider,
) -> None:
    provider.add(
        Reply(
            reasoning="The user wants the file read first.",
            tool_calls=[ScriptedCall("read", {"path": "x"}, id="call_1")],
        ),
        Reply(text="It says hello."),
    )
    client = client_for(provider)
    history = conversation({"role": "user", "content": "what is in x?"})

    first, recorder = await ask(client, history, tools=TOOLS)

    assert first.reasoning == "The user wants the file read first."
    assert "".join(recorder.reasonings) == first.reasoning
    assert first.reasoning_details is not None
    assert first.reasoning_details["source"] == f"codex_responses|{provider.openai_base_url}"
    assert provider.requests[0].body["include"] == ["reasoning.encrypted_content"]
    history += [first.to_message(), {"role": "tool", "tool_call_id": "call_1", "content": "hello"}]

    second, _ = await ask(client, history, tools=TOOLS)

    assert second.text == "It says hello."
    replayed = provider.requests[1].body["input"][1]
    assert replayed["type"] == "reasoning"
    assert replayed["encrypted_content"] == first.reasoning_details["items"][0]["encrypted_content"]
    assert provider.invalid_requests == []

    with ScriptedProvider([Reply(text="Hello from elsewhere.")]) as other:
        third, _ = await ask(client_for(other), history, tools=TOOLS)
        assert third.text == "Hello from elsewhere."
        assert "reasoning" not in [item["type"] for item in other.requests[0].body["input"]]
        assert other.invalid_requests == []


async def test_orphan_tool_result_is_rejected_with_400(provider: ScriptedProvider) -> None:
    history = conversation(
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "call_missing", "content": "stray"},
    )

    with pytest.raises(ProviderError) as caught:
        await ask(client_for(provider), history)

    assert caught.value.kind is ErrorKind.BAD_REQUEST
    assert caught.value.status == 400
    assert "No tool call found" in caught.value.message
    assert provider.script.consumed == 0


async def test_usage_is_normalised_to_disjoint_buckets(provider: ScriptedProvider) -> None:
    provider.add(
        Reply(
            text="ok",
            usage={
                "input_tokens": 100,
                "cache_read_tokens": 900,
                "cache_write_tokens": 50,
                "output_tokens": 40,
                "reasoning_tokens": 30,
            },
        )
    )

    response, _ = await ask(client_for(provider), conversation({"role": "user", "content": "x"}))

    usage = response.usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (100, 900, 50)
    assert (usage.output_tokens, usage.reasoning_tokens) == (40, 30)


async def test_output_limit_reports_length(provider: ScriptedProvider) -> None:
    provider.add(Reply(text="It was the best of", finish_reason="length"))

    response, _ = await ask(
        client_for(provider), conversation({"role": "user", "content": "a novel"}), max_tokens=5
    )

    assert response.finish_reason == "length"
    assert response.text == "It was the best of"
    assert provider.requests[0].body["max_output_tokens"] == 5


async def test_refusal_is_reported_not_shown_as_text(provider: ScriptedProvider) -> None:
    provider.add(Reply(refusal="I can't help with that."))

    response, recorder = await ask(
        client_for(provider), conversation({"role": "user", "content": "x"})
    )

    assert response.refusal == "I can't help with that."
    assert response.text is None
    assert response.finish_reason == "refusal"
    assert recorder.texts == []


async def test_images_become_input_image_parts(provider: ScriptedProvider) -> None:
    provider.add(Reply(text="A cat."))
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]

    await ask(client_for(provider), conversation({"role": "user", "content": content}))

    assert provider.requests[0].body["input"][0]["content"] == [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"},
    ]


@pytest.mark.parametrize(
    ("step", "kind"),
    [
        (Fail(429, "Rate limit reached", headers={"retry-after": "3"}), ErrorKind.RATE_LIMIT),
        (Fail(401, "Incorrect API key provided"), ErrorKind.AUTH),
        (Fail(500, "The server had an error"), ErrorKind.SERVER),
        (Malformed("{not json"), ErrorKind.INVALID_RESPONSE),
    ],
)
async def test_failures_become_provider_errors(
    provider: ScriptedProvider, step: Any, kind: ErrorKind
) -> None:
    provider.add(step)

    with pytest.raises(ProviderError) as caught:
        await ask(
            client_for(provider), conversation({"role": "user", "content": "x"}), stream=False
        )

    assert caught.value.kind is kind
    assert caught.value.provider == "openai"


async def test_an_empty_answer_comes_back_as_it_is(provider: ScriptedProvider) -> None:
    """Whether it is usable is the loop's decision (a nudge), the same for every wire."""
    provider.add(Reply())
    response, _ = await ask(client_for(provider), conversation({"role": "user", "content": "x"}))
    assert (response.text, response.tool_calls) == (None, [])


async def test_dropped_stream_after_text_is_a_connection_error_with_output_started(
    provider: ScriptedProvider,
) -> None:
    provider.add(Drop(Reply(text="partial answer that never ends", chunk_size=4), after_chunks=7))

    with pytest.raises(ProviderError) as caught:
        await ask(client_for(provider), conversation({"role": "user", "content": "x"}))

    assert caught.value.kind is ErrorKind.CONNECTION
    assert caught.value.output_started is True


async def test_the_official_sdk_reads_the_scripted_stream(provider: ScriptedProvider) -> None:
    """The wire is real enough for the SDK's own typed streaming helpers."""
    import openai

    provider.add(Reply(text="typed events", reasoning="brief thought"))
    sdk = openai.AsyncOpenAI(base_url=provider.openai_base_url, api_key="sk-test", max_retries=0)
    try:
        stream = await sdk.responses.create(
            model="gpt-5",
            input=[{"role": "user", "content": "hi"}],
            store=False,
            stream=True,
            include=["reasoning.encrypted_content"],
        )
        seen = [event async for event in stream]
    finally:
        await sdk.close()

    assert seen[-1].type == "response.completed"
    assert seen[-1].response.output_text == "typed events"
    deltas = [e.delta for e in seen if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "typed events"


async def test_null_stream_and_extra_body_reach_the_request(provider: ScriptedProvider) -> None:
    provider.add(Reply(text="ok"))
    client = ResponsesClient(
        "gpt-4.1",
        base_url=provider.openai_base_url + "/",
        api_key="sk-test",
        extra_body={"reasoning": {"effort": "low"}},
    )

    response = await client.complete(
        ModelRequest(messages=conversation({"role": "user", "content": "x"})), NullStream()
    )
    await client.aclose()

    assert response.text == "ok"
    sent = provider.requests[0].body
    assert sent["reasoning"] == {"effort": "low"}
    assert sent["include"] == ["reasoning.encrypted_content"]
    assert client.base_url == provider.openai_base_url
