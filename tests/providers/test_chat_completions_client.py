"""ChatCompletionsClient through the official openai SDK against the scripted HTTP provider."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from helpers import FOREVER, RecordingStream
from talaria.core import ModelRequest
from talaria.providers.base import NullStream
from talaria.providers.errors import ErrorKind, ProviderError
from talaria.providers.wire.chat_completions import ChatCompletionsClient
from talaria.testing.script import Drop, Fail, Malformed, Reply, ScriptedCall, Stall
from talaria.testing.server import ScriptedProvider

USER = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


@pytest.fixture
async def client(provider: ScriptedProvider) -> AsyncIterator[ChatCompletionsClient]:
    chat = ChatCompletionsClient("gpt-test", base_url=provider.openai_base_url, api_key="sk-test")
    yield chat
    await chat.aclose()


def request(messages: list[dict[str, Any]] | None = None, **kwargs: Any) -> ModelRequest:
    return ModelRequest(messages=messages or list(USER), **kwargs)


async def test_streamed_text_arrives_in_pieces_and_whole(
    provider: ScriptedProvider, client: ChatCompletionsClient, recorder: RecordingStream
) -> None:
    provider.add(Reply(text="Hello there, general Kenobi.", chunk_size=5))
    response = await client.complete(request(), recorder)
    assert response.text == "Hello there, general Kenobi."
    assert len(recorder.texts) > 3
    assert "".join(recorder.texts) == response.text
    assert response.finish_reason == "stop"
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    sent = provider.requests[0]
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.headers["authorization"] == "Bearer sk-test"


async def test_non_streaming_text(
    provider: ScriptedProvider, client: ChatCompletionsClient, recorder: RecordingStream
) -> None:
    provider.add(Reply(text="whole answer", reasoning="short thought"))
    response = await client.complete(request(stream=False), recorder)
    assert (response.text, response.reasoning) == ("whole answer", "short thought")
    assert "stream_options" not in provider.requests[0].body
    assert response.response_id and response.response_id.startswith("chatcmpl-")


async def test_parallel_tool_calls_are_assembled_in_order(
    provider: ScriptedProvider, client: ChatCompletionsClient, recorder: RecordingStream
) -> None:
    provider.add(
        Reply(
            tool_calls=[
                ScriptedCall("read_file", {"path": "a.py"}, id="call_a"),
                ScriptedCall("terminal", {"command": "ls -la /tmp"}, id="call_b"),
                ScriptedCall("patch", '{"path": "x', id="call_c"),
            ],
            chunk_size=4,
        )
    )
    tools = [
        {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
        for n in ("read_file", "terminal", "patch")
    ]
    response = await client.complete(request(tools=tools), recorder)
    assert [(c.id, c.name) for c in response.tool_calls] == [
        ("call_a", "read_file"),
        ("call_b", "terminal"),
        ("call_c", "patch"),
    ]
    assert json.loads(response.tool_calls[1].arguments) == {"command": "ls -la /tmp"}
    assert response.tool_calls[2].arguments == '{"path": "x'
    assert recorder.tool_calls == [
        (0, "call_a", "read_file"),
        (1, "call_b", "terminal"),
        (2, "call_c", "patch"),
    ]
    assert response.finish_reason == "tool_calls"
    assert provider.requests[0].body["tool_choice"] == "auto"


async def test_reasoning_content_streams_to_the_reasoning_channel(
    provider: ScriptedProvider, client: ChatCompletionsClient, recorder: RecordingStream
) -> None:
    provider.add(Reply(text="42", reasoning="Six times seven is forty-two.", chunk_size=6))
    response = await client.complete(request(), recorder)
    assert "".join(recorder.reasonings) == "Six times seven is forty-two."
    assert response.reasoning == "Six times seven is forty-two."
    assert recorder.texts == ["42"]


@pytest.mark.parametrize("stream", [True, False])
async def test_think_tags_become_reasoning_not_text(
    provider: ScriptedProvider,
    client: ChatCompletionsClient,
    recorder: RecordingStream,
    stream: bool,
) -> None:
    provider.add(
        Reply(text="<think>check the docs first</think>\n\nThe answer is 4.", chunk_size=3)
    )
    response = await client.complete(request(stream=stream), recorder)
    assert response.text == "The answer is 4."
    assert response.reasoning == "check the docs first"
    assert "think" not in "".join(recorder.texts)


async def test_usage_comes_back_in_disjoint_buckets(
    provider: ScriptedProvider, client: ChatCompletionsClient
) -> None:
    buckets = {
        "input_tokens": 120,
        "output_tokens": 30,
        "cache_read_tokens": 900,
        "cache_write_tokens": 50,
        "reasoning_tokens": 12,
    }
    provider.add(Reply(text="ok", usage=buckets), Reply(text="ok", usage=buckets))
    streamed = await client.complete(request(), NullStream())
    whole = await client.complete(request(stream=False), NullStream())
    for usage in (streamed.usage, whole.usage):
        assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
            120,
            900,
            50,
        )
        assert (usage.output_tokens, usage.reasoning_tokens) == (30, 12)
        assert usage.prompt_tokens == 1070


async def test_history_is_sent_without_talaria_only_keys(
    provider: ScriptedProvider, client: ChatCompletionsClient
) -> None:
    history = [
        *USER,
        {
            "role": "assistant",
            "content": None,
            "reasoning": "r",
            "reasoning_details": {"source": "x", "items": []},
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    ]
    provider.add(Reply(text="done"))
    response = await client.complete(request(history, max_tokens=64), NullStream())
    assert response.text == "done"
    sent = provider.requests[0].body
    assert provider.requests[0].valid
    assert "reasoning" not in sent["messages"][2] and "reasoning_details" not in sent["messages"][2]
    assert sent["max_tokens"] == 64
    assert "tools" not in sent and "tool_choice" not in sent


async def test_strict_400_names_the_problem_and_keeps_the_step(
    provider: ScriptedProvider, client: ChatCompletionsClient
) -> None:
    provider.add(Reply(text="fine"))
    orphan = [*USER, {"role": "tool", "tool_call_id": "call_gone", "content": "x"}]
    with pytest.raises(ProviderError) as caught:
        await client.complete(request(orphan), NullStream())
    assert caught.value.kind is ErrorKind.BAD_REQUEST and caught.value.status == 400
    assert "call_gone" in caught.value.message and "'tool'" in caught.value.message
    assert (await client.complete(request(), NullStream())).text == "fine"


async def test_rate_limit_carries_retry_after(
    provider: ScriptedProvider, client: ChatCompletionsClient
) -> None:
    provider.add(Fail(429, "Rate limit reached for requests", headers={"Retry-After": "7"}))
    with pytest.raises(ProviderError) as caught:
        await client.complete(request(), NullStream())
    assert caught.value.kind is ErrorKind.RATE_LIMIT
    assert caught.value.retry_after == 7.0
    assert caught.value.message == "Rate limit reached for requests"


@pytest.mark.parametrize(
    ("fail", "kind"),
    [
        (Fail(529, "Overloaded"), ErrorKind.OVERLOADED),
        (Fail(503, "The engine is currently overloaded"), ErrorKind.OVERLOADED),
        (Fail(500, "boom"), ErrorKind.SERVER),
        (Fail(401, "Incorrect API key provided"), ErrorKind.AUTH),
        (
            Fail(
                400,
                "This model's maximum context length is 8192 tokens. However, your "
                "messages resulted in 9000 tokens.",
            ),
            ErrorKind.CONTEXT_OVERFLOW,
        ),
        (Fail(404, "The model `gpt-x` does not exist"), ErrorKind.BAD_REQUEST),
    ],
)
async def test_http_failures_are_classified(
    provider: ScriptedProvider, client: ChatCompletionsClient, fail: Fail, kind: ErrorKind
) -> None:
    provider.add(fail)
    with pytest.raises(ProviderError) as caught:
        await client.complete(request(), NullStream())
    assert caught.value.kind is kind
    assert caught.value.status == fail.status
    assert caught.value.message == fail.message
    assert (caught.value.provider, caught.value.model) == ("openai", "gpt-test")


async def test_drop_mid_stream_is_a_connection_error_after_output(
    provider: ScriptedProvider, client: ChatCompletionsClient, recorder: RecordingStream
) -> None:
    provider.add(Drop(Reply(text="partial answer that never ends", chunk_size=4), after_chunks=3))
    with pytest.raises(ProviderError) as caught:
        await client.complete(request(), recorder)
    assert caught.value.kind is ErrorKind.CONNECTION
    assert caught.value.output_started
    assert recorder.texts == ["part", "ial "]


async def test_drop_before_output_is_not_marked_started(
    provider: ScriptedProvider, client: ChatCompletionsClient
) -> None:
    provider.add(Drop(Reply(text="never seen"), after_chunks=0))
    with pytest.raises(ProviderError) as caught:
        await client.complete(request(), NullStream())
    assert caught.value.kind is ErrorKind.CONNECTION
    assert not caught.value.output_started


@pytest.mark.parametrize("stream", [True, False])
async def test_malformed_body_is_an_invalid_response(
    provider: ScriptedProvider, client: ChatCompletionsClient, stream: bool
) -> None:
    provider.add(Malformed("{not json"))
    with pytest.raises(ProviderError) as caught:
        await client.complete(request(stream=stream), NullStream())
    assert caught.value.kind is ErrorKind.INVALID_RESPONSE


async def test_refusal_is_reported_as_such(
    provider: ScriptedProvider, client: ChatCompletionsClient
) -> None:
    provider.add(Reply(refusal="I can't help with that."), Reply(refusal="No."))
    streamed = await client.complete(request(), NullStream())
    whole = await client.complete(request(stream=False), NullStream())
    assert (streamed.refusal, streamed.finish_reason) == ("I can't help with that.", "refusal")
    assert (whole.refusal, whole.finish_reason, whole.text) == ("No.", "refusal", None)


async def test_truncated_answer_reports_length(
    provider: ScriptedProvider, client: ChatCompletionsClient
) -> None:
    provider.add(Reply(text="cut", finish_reason="length"))
    assert (await client.complete(request(), NullStream())).finish_reason == "length"


@pytest.mark.timeout(60)
async def test_silent_stream_times_out(provider: ScriptedProvider) -> None:
    provider.add(Stall(Reply(text="slow start, then nothing"), after_chunks=2, seconds=FOREVER))
    chat = ChatCompletionsClient("m", base_url=provider.openai_base_url, api_key="k", timeout=0.3)
    with pytest.raises(ProviderError) as caught:
        await chat.complete(request(), NullStream())
    await chat.aclose()
    assert caught.value.kind is ErrorKind.TIMEOUT


@pytest.mark.timeout(60)
async def test_cancellation_abandons_a_slow_call(
    provider: ScriptedProvider, client: ChatCompletionsClient
) -> None:
    provider.add(Reply(text="late", delay=FOREVER))
    task = asyncio.create_task(client.complete(request(), NullStream()))
    while not provider.requests:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_one_client_serves_several_event_loops(provider: ScriptedProvider) -> None:
    """A sync facade runs one asyncio.run per call; the client must survive that."""
    chat = ChatCompletionsClient("m", base_url=provider.openai_base_url, api_key="k")
    provider.add(Reply(text="first"), Reply(text="second"))
    first = asyncio.run(chat.complete(request(), NullStream()))
    second = asyncio.run(chat.complete(request(), NullStream()))
    assert (first.text, second.text) == ("first", "second")


async def test_missing_api_key_is_a_config_error(
    provider: ScriptedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    chat = ChatCompletionsClient("m", base_url=provider.openai_base_url, api_key=None)
    with pytest.raises(ProviderError) as caught:
        await chat.complete(request(), NullStream())
    assert caught.value.kind is ErrorKind.CONFIG
    assert provider.requests == []


# classify_exception: table-driven over the real SDK exception types.


def _response(status: int, headers: dict[str, str] | None = None) -> Any:
    import httpx2

    request = httpx2.Request("POST", "https://api.example.com/v1/x")
    return httpx2.Response(status, headers=headers or {}, request=request)


def _openai(status: int, message: str, code: str | None = None, **headers: str) -> BaseException:
    import openai

    body = {"message": message, "type": "invalid_request_error", "param": None, "code": code}
    response = _response(status, {k.replace("_", "-"): v for k, v in headers.items()})
    return openai.APIStatusError(f"Error code: {status} - {body}", response=response, body=body)


def _anthropic(status: int, kind: str, message: str, **headers: str) -> BaseException:
    import anthropic

    body = {"type": "error", "error": {"type": kind, "message": message}}
    response = _response(status, {k.replace("_", "-"): v for k, v in headers.items()})
    return anthropic.APIStatusError(f"Error code: {status} - {body}", response=response, body=body)


def _transport(name: str) -> BaseException:
    import httpx2

    return getattr(httpx2, name)("boom", request=httpx2.Request("GET", "http://x"))


def _openai_connection() -> BaseException:
    import httpx2
    import openai

    return openai.APIConnectionError(request=httpx2.Request("GET", "http://x"))


def _openai_timeout() -> BaseException:
    import httpx2
    import openai

    return openai.APITimeoutError(request=httpx2.Request("GET", "http://x"))


def _stream_error(body: dict[str, Any]) -> BaseException:
    import httpx2
    import openai

    return openai.APIError("stream error", httpx2.Request("GET", "http://x"), body=body)


@pytest.mark.parametrize(
    ("make", "kind", "message"),
    [
        (
            lambda: _openai(429, "Rate limit reached", "rate_limit_exceeded"),
            ErrorKind.RATE_LIMIT,
            "Rate limit reached",
        ),
        (
            lambda: _openai(
                400,
                "This model's maximum context length is 128000 tokens.",
                "context_length_exceeded",
            ),
            ErrorKind.CONTEXT_OVERFLOW,
            None,
        ),
        (lambda: _openai(400, "bad", "context_length_exceeded"), ErrorKind.CONTEXT_OVERFLOW, None),
        (
            lambda: _openai(
                400,
                "This endpoint's maximum context length is 8192 tokens. However, "
                "you requested about 9000 tokens",
            ),
            ErrorKind.CONTEXT_OVERFLOW,
            None,
        ),
        (
            lambda: _openai(
                400,
                "The decoder prompt (length 5000) is longer than the maximum model length of 4096.",
            ),
            ErrorKind.CONTEXT_OVERFLOW,
            None,
        ),
        (
            lambda: _openai(
                400, "the request exceeds the available context size, try increasing it"
            ),
            ErrorKind.CONTEXT_OVERFLOW,
            None,
        ),
        (lambda: _openai(400, "Invalid value for 'temperature'"), ErrorKind.BAD_REQUEST, None),
        (lambda: _openai(401, "Incorrect API key provided"), ErrorKind.AUTH, None),
        (lambda: _openai(403, "Project does not have access"), ErrorKind.AUTH, None),
        (lambda: _openai(402, "Insufficient credits"), ErrorKind.AUTH, None),
        (lambda: _openai(500, "The server had an error"), ErrorKind.SERVER, None),
        (lambda: _openai(503, "The engine is currently overloaded"), ErrorKind.OVERLOADED, None),
        (
            lambda: _anthropic(529, "overloaded_error", "Overloaded"),
            ErrorKind.OVERLOADED,
            "Overloaded",
        ),
        (
            lambda: _anthropic(
                400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
            ),
            ErrorKind.CONTEXT_OVERFLOW,
            "prompt is too long: 210000 tokens > 200000 maximum",
        ),
        (
            lambda: _anthropic(413, "request_too_large", "Request exceeds the maximum size"),
            ErrorKind.BAD_REQUEST,
            None,
        ),
        (
            lambda: _anthropic(
                400, "invalid_request_error", "messages.1: tool_use ids must be unique"
            ),
            ErrorKind.BAD_REQUEST,
            "messages.1: tool_use ids must be unique",
        ),
        (lambda: _anthropic(200, "overloaded_error", "Overloaded"), ErrorKind.OVERLOADED, None),
        (
            lambda: _stream_error({"message": "Provider disconnected", "code": "server_error"}),
            ErrorKind.SERVER,
            "Provider disconnected",
        ),
        (_openai_connection, ErrorKind.CONNECTION, None),
        (_openai_timeout, ErrorKind.TIMEOUT, None),
        (lambda: _transport("ReadTimeout"), ErrorKind.TIMEOUT, None),
        (lambda: _transport("RemoteProtocolError"), ErrorKind.CONNECTION, None),
        (lambda: ConnectionResetError("reset by peer"), ErrorKind.CONNECTION, None),
        (
            lambda: json.JSONDecodeError("Expecting value", "{x", 1),
            ErrorKind.INVALID_RESPONSE,
            None,
        ),
    ],
)
def test_classify_exception(make: Any, kind: ErrorKind, message: str | None) -> None:
    from talaria.providers.resilience.classify import classify_exception

    error = classify_exception(make(), provider="p", model="m")
    assert error.kind is kind
    assert "\n" not in error.message and len(error.message) <= 300
    if message is not None:
        assert error.message == message


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry_after": "12"}, 12.0),
        ({"retry_after_ms": "1500", "retry_after": "9"}, 1.5),
        ({"retry_after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
        ({"x_ratelimit_reset_requests": "1s", "x_ratelimit_reset_tokens": "6m0s"}, 360.0),
        ({"x_ratelimit_reset_tokens": "20ms"}, 0.02),
        ({}, None),
        ({"retry_after": "soon"}, None),
    ],
)
def test_rate_limit_retry_after_headers(headers: dict[str, str], seconds: float | None) -> None:
    from talaria.providers.resilience.classify import classify_exception

    error = classify_exception(_openai(429, "slow down", **headers), provider="p", model="m")
    assert error.retry_after == (pytest.approx(seconds) if seconds is not None else None)


def test_retry_after_http_date_in_the_future() -> None:
    from email.utils import formatdate

    from talaria.providers.resilience.classify import retry_after

    now = time.time()
    assert retry_after({"retry-after": formatdate(now + 30, usegmt=True)}, now=now) == (
        pytest.approx(30, abs=1)
    )


def test_long_provider_messages_are_cut_to_one_line() -> None:
    from talaria.providers.resilience.classify import classify_exception

    error = classify_exception(
        _openai(400, "line one\nline two " + "x" * 500), provider="p", model="m"
    )
    assert error.message.startswith("line one line two")
    assert error.message.endswith("...") and len(error.message) == 300


def test_claude_through_a_chat_endpoint_gets_cache_markers(tmp_path: Path) -> None:
    from helpers import scripted_agent
    from talaria.testing import text as reply_text

    server = ScriptedProvider([reply_text("one"), reply_text("two")])
    with server, scripted_agent(server, tmp_path, model="anthropic/claude-sonnet-4") as agent:
        agent.chat("first")
        agent.chat("second")
    assert server.invalid_requests == []
    bodies = [r.body for r in server.requests]
    marked = [sum(1 for m in b["messages"] if _has_marker(m)) for b in bodies]
    assert marked == [2, 4], marked
    assert bodies[0]["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}


def _has_marker(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any("cache_control" in part for part in content)


@pytest.mark.parametrize(
    ("base_url", "field"),
    [
        ("https://api.openai.com/v1", "max_completion_tokens"),
        ("http://127.0.0.1:8000/v1", "max_tokens"),
        ("https://openrouter.ai/api/v1", "max_tokens"),
    ],
)
def test_output_limit_uses_the_field_the_endpoint_reads(base_url: str, field: str) -> None:
    client = ChatCompletionsClient("gpt-5", base_url=base_url, api_key="k")
    request = ModelRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=500)
    body = client.build_body(request)
    assert body[field] == 500
    (other,) = {"max_tokens", "max_completion_tokens"} - {field}
    assert other not in body
