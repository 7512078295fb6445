"""The scripted provider (HTTP server + Chat Completions wire) and the in-process ScriptedModel."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from typing import Any

import httpx
import pytest

from helpers import FOREVER, RecordingStream
from talaria.core import ModelRequest
from talaria.providers.base import NullStream
from talaria.providers.errors import ErrorKind, ProviderError
from talaria.testing import server as server_module
from talaria.testing.script import Drop, Fail, Malformed, Reply, ScriptedCall, Stall, text
from talaria.testing.scripted_model import ScriptedModel
from talaria.testing.server import ScriptedProvider
from talaria.testing.wire_chat import WIRE

SYSTEM = {"role": "system", "content": "sys"}
USER = {"role": "user", "content": "hi"}


def assistant_calling(*ids: str) -> dict[str, Any]:
    calls = [
        {"id": i, "type": "function", "function": {"name": "ls", "arguments": "{}"}} for i in ids
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


def body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": messages, **extra}


# The Chat Completions wire rejects what OpenAI (and strict compatible providers) reject.

VALID = [
    SYSTEM,
    USER,
    assistant_calling("a", "b"),
    result("a"),
    result("b"),
    {"role": "assistant", "content": "done"},
    USER,
]


def test_a_well_formed_history_is_valid() -> None:
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}]
    assert WIRE.validate(body(VALID, tools=tools, tool_choice="auto")) == []


@pytest.mark.parametrize(
    ("request_body", "needle"),
    [
        (body([]), "non-empty"),
        ({"messages": [USER]}, "model"),
        (body([USER, {"role": "tool", "tool_call_id": "x", "content": "r"}]), "'tool'"),
        (body([USER, assistant_calling("a", "b"), result("a")]), "did not have response"),
        (body([USER, assistant_calling("a"), USER, result("a")]), "did not have response"),
        (body([USER, assistant_calling("a"), result("a"), result("a")]), "'tool'"),
        (body([USER, USER]), "two consecutive 'user'"),
        (
            body(
                [USER, {"role": "assistant", "content": "x"}, {"role": "assistant", "content": "y"}]
            ),
            "two consecutive 'assistant'",
        ),
        (
            body([USER, {"role": "assistant", "content": "x", "reasoning_details": {}}]),
            "reasoning_details",
        ),
        (body([USER, {"role": "narrator", "content": "x"}]), "role"),
        (body([{"role": "user", "content": None}]), "content"),
        (
            body(
                [
                    USER,
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "a",
                                "type": "function",
                                "function": {"name": "ls", "arguments": {}},
                            }
                        ],
                    },
                    result("a"),
                ]
            ),
            "arguments",
        ),
        (
            body([USER], tools=[{"type": "function", "function": {"name": "bad name!"}}]),
            "does not match",
        ),
        (
            body(
                [USER],
                tools=[
                    {"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}
                ],
            ),
            "parameters",
        ),
        (body([USER], tool_choice="auto"), "tool_choice"),
        (body([USER], stream_options={"include_usage": True}), "stream_options"),
        (body([{"role": "user", "content": [{"type": "image", "url": "x"}]}]), "not allowed"),
    ],
)
def test_invalid_requests_are_rejected_with_a_reason(
    request_body: dict[str, Any], needle: str
) -> None:
    errors = WIRE.validate(request_body)
    assert errors, "expected a validation error"
    assert needle in " ".join(errors)


# The HTTP server.


def post(
    server: ScriptedProvider, payload: Any, path: str = "/v1/chat/completions"
) -> httpx.Response:
    return httpx.post(server.url + path, json=payload, timeout=5)


def test_invalid_request_gets_400_and_keeps_the_step(provider: ScriptedProvider) -> None:
    provider.add(text("answer"))
    orphan = body([USER, result("nope")])
    rejected = post(provider, orphan)
    assert rejected.status_code == 400
    assert "'tool'" in rejected.json()["error"]["message"]
    assert rejected.json()["error"]["type"] == "invalid_request_error"
    accepted = post(provider, body([USER]))
    assert accepted.json()["choices"][0]["message"]["content"] == "answer"
    assert [r.valid for r in provider.requests] == [False, True]
    assert provider.invalid_requests[0].body == orphan
    assert provider.invalid_requests[0].errors


def test_non_strict_server_answers_invalid_requests() -> None:
    with ScriptedProvider([text("lenient")], strict=False) as server:
        answer = post(server, body([USER, USER]))
        assert answer.json()["choices"][0]["message"]["content"] == "lenient"
        assert server.requests[0].valid is False


def test_exhausted_script_says_so(provider: ScriptedProvider) -> None:
    answer = post(provider, body([USER]))
    assert answer.status_code == 500
    assert "script exhausted" in answer.json()["error"]["message"]


def test_fail_sends_its_status_headers_and_body(provider: ScriptedProvider) -> None:
    provider.add(
        Fail(429, "slow down", headers={"Retry-After": "3"}), Fail(502, body={"custom": True})
    )
    first = post(provider, body([USER]))
    assert (first.status_code, first.headers["retry-after"]) == (429, "3")
    assert first.json()["error"]["message"] == "slow down"
    second = post(provider, body([USER]))
    assert (second.status_code, second.json()) == (502, {"custom": True})


def test_malformed_sends_raw_text(provider: ScriptedProvider) -> None:
    provider.add(Malformed("<html>gateway</html>"))
    answer = post(provider, body([USER]))
    assert (answer.status_code, answer.text) == (200, "<html>gateway</html>")


def test_callable_steps_see_the_request(provider: ScriptedProvider) -> None:
    provider.add(lambda request: text(f"you sent {len(request['messages'])} messages"))
    answer = post(provider, body([SYSTEM, USER]))
    assert answer.json()["choices"][0]["message"]["content"] == "you sent 2 messages"


def test_models_endpoint_reports_the_context_length() -> None:
    with ScriptedProvider(model="tiny", context_length=4096) as server:
        listing = httpx.get(server.openai_base_url + "/models").json()
    assert listing["data"][0]["id"] == "tiny"
    assert listing["data"][0]["context_length"] == 4096


def test_unknown_paths_and_missing_wires_answer_404(
    provider: ScriptedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert post(provider, body([USER]), "/v2/chat").status_code == 404
    monkeypatch.setitem(server_module.ROUTES, "/v1/messages", "talaria.testing.wire_nowhere")
    missing = post(provider, {"model": "m"}, "/v1/messages")
    assert missing.status_code == 404
    assert "wire_nowhere is not available" in missing.json()["error"]["message"]


def test_unparseable_json_is_a_400(provider: ScriptedProvider) -> None:
    answer = httpx.post(provider.url + "/v1/chat/completions", content=b"{oops", timeout=5)
    assert answer.status_code == 400


def sse_events(response: httpx.Response) -> list[str]:
    return [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]


def test_stream_shape_with_usage(provider: ScriptedProvider) -> None:
    provider.add(Reply(text="abcdefghij", chunk_size=4, tool_calls=[ScriptedCall("ls", id="c9")]))
    answer = post(provider, body([USER], stream=True, stream_options={"include_usage": True}))
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = sse_events(answer)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    texts = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
    assert "".join(t for t in texts if t) == "abcdefghij"
    call = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in chunks
        if c["choices"] and "tool_calls" in c["choices"][0]["delta"]
    ]
    assert (call[0]["id"], call[0]["function"]["name"]) == ("c9", "ls")
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0


def test_stream_without_include_usage_has_no_usage(provider: ScriptedProvider) -> None:
    provider.add(text("hi"))
    chunks = [json.loads(e) for e in sse_events(post(provider, body([USER], stream=True)))[:-1]]
    assert all("usage" not in c for c in chunks)
    assert all(c["choices"] for c in chunks)


def test_usage_follows_openai_convention(provider: ScriptedProvider) -> None:
    provider.add(
        Reply(
            text="x",
            usage={
                "input_tokens": 10,
                "cache_read_tokens": 90,
                "output_tokens": 5,
                "reasoning_tokens": 2,
            },
        )
    )
    usage = post(provider, body([USER])).json()["usage"]
    assert (usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"]) == (100, 90)
    assert usage["completion_tokens_details"]["reasoning_tokens"] == 2
    assert usage["total_tokens"] == 105


def _read_until_stopped(server: ScriptedProvider, stream: bool) -> bytes:
    """What a client receives from the server's next answer when the server stops as soon as
    the request has arrived (the client's read is cut off at the stop)."""
    received: list[bytes] = []

    def consume() -> None:
        with (
            contextlib.suppress(httpx.HTTPError),
            httpx.stream(
                "POST",
                server.url + "/v1/chat/completions",
                json=body([USER], stream=stream),
                timeout=60,
            ) as answer,
        ):
            for data in answer.iter_bytes():
                received.append(data)

    client = threading.Thread(target=consume)
    client.start()
    while not server.requests or (stream and not received):
        time.sleep(0.01)
    server.stop()
    client.join(timeout=30)
    assert not client.is_alive()
    return b"".join(received)


@pytest.mark.timeout(60)
def test_a_delay_holds_the_answer_back_while_it_lasts() -> None:
    server = ScriptedProvider([Reply(text="never seen", delay=FOREVER)]).start()
    assert b"never seen" not in _read_until_stopped(server, stream=False)


@pytest.mark.timeout(60)
def test_a_chunk_delay_holds_back_each_next_chunk() -> None:
    server = ScriptedProvider([Reply(text="abcd", chunk_size=1, chunk_delay=FOREVER)]).start()
    received = _read_until_stopped(server, stream=True)
    assert received.count(b"data: ") == 1 and b"[DONE]" not in received


def test_drop_cuts_the_stream_without_a_terminator(provider: ScriptedProvider) -> None:
    provider.add(Drop(Reply(text="abcdefgh", chunk_size=2), after_chunks=2))
    received = b""
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream(
            "POST", provider.url + "/v1/chat/completions", json=body([USER], stream=True)
        ) as answer,
    ):
        for data in answer.iter_bytes():
            received += data
    assert received.count(b"data: ") == 2
    assert b"[DONE]" not in received


def test_stall_resumes_after_its_pause(provider: ScriptedProvider) -> None:
    provider.add(Stall(Reply(text="abcd", chunk_size=2), after_chunks=1, seconds=0.3))
    events = sse_events(post(provider, body([USER], stream=True)))
    assert events[-1] == "[DONE]"


@pytest.mark.timeout(60)
def test_a_stall_holds_the_stream_while_it_lasts() -> None:
    server = ScriptedProvider(
        [Stall(Reply(text="abcd", chunk_size=2), after_chunks=1, seconds=FOREVER)]
    )
    received = _read_until_stopped(server.start(), stream=True)
    assert received.count(b"data: ") == 1 and b"[DONE]" not in received


@pytest.mark.timeout(60)
def test_stop_returns_promptly_with_a_stalled_stream_open() -> None:
    server = ScriptedProvider([Stall(Reply(text="abcdef"), after_chunks=1, seconds=FOREVER)])
    server.start()
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            with httpx.stream(
                "POST",
                server.url + "/v1/chat/completions",
                json=body([USER], stream=True),
                timeout=30,
            ) as answer:
                for _ in answer.iter_bytes():
                    pass
        except httpx.HTTPError as exc:
            errors.append(exc)

    client = threading.Thread(target=consume)
    client.start()
    deadline = time.monotonic() + 5
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    server.stop()
    client.join(timeout=5)
    assert not client.is_alive()
    assert errors, "the stalled stream should end with an error, not a clean finish"


def test_concurrent_requests_each_get_one_step(provider: ScriptedProvider) -> None:
    provider.add(*[text(f"answer {i}", delay=0.05) for i in range(8)])
    answers: list[str] = []

    def ask() -> None:
        reply = post(provider, body([USER])).json()
        answers.append(reply["choices"][0]["message"]["content"])

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == sorted(f"answer {i}" for i in range(8))


# The in-process ScriptedModel.


def ask(*messages: dict[str, Any], **kwargs: Any) -> ModelRequest:
    return ModelRequest(messages=list(messages) or [SYSTEM, USER], **kwargs)


async def test_scripted_model_streams_text_and_tool_calls(recorder: RecordingStream) -> None:
    model = ScriptedModel(
        [
            Reply(
                text="<think>hmm</think>Looking.",
                reasoning="plan",
                chunk_size=4,
                tool_calls=[ScriptedCall("ls", {"path": "."}), ScriptedCall("cat", "{bad")],
            ),
        ]
    )
    response = await model.complete(ask(), recorder)
    assert "".join(recorder.texts) == response.text == "Looking."
    assert "".join(recorder.reasonings) == response.reasoning == "planhmm"
    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("ls", '{"path": "."}'),
        ("cat", "{bad"),
    ]
    assert recorder.tool_calls == [(0, "call_0001", "ls"), (1, "call_0002", "cat")]
    assert response.finish_reason == "tool_calls"
    assert response.usage.input_tokens > 0
    assert model.requests[0].messages[1] == USER


async def test_scripted_model_non_streaming_emits_nothing(recorder: RecordingStream) -> None:
    model = ScriptedModel([text("quiet")])
    response = await model.complete(ask(stream=False), recorder)
    assert response.text == "quiet"
    assert recorder.texts == []


async def test_scripted_model_is_strict_about_history() -> None:
    model = ScriptedModel([text("never")])
    with pytest.raises(ProviderError) as caught:
        await model.complete(ask(USER, assistant_calling("a"), USER), NullStream())
    assert caught.value.kind is ErrorKind.BAD_REQUEST
    assert "did not have response" in caught.value.message
    assert model.script.remaining == 1


@pytest.mark.parametrize(
    ("step", "kind"),
    [
        (Fail(429, "slow", headers={"Retry-After": "2"}), ErrorKind.RATE_LIMIT),
        (Fail(529), ErrorKind.OVERLOADED),
        (Fail(500), ErrorKind.SERVER),
        (Fail(403), ErrorKind.AUTH),
        (Fail(400, "prompt is too long: 300000 tokens"), ErrorKind.CONTEXT_OVERFLOW),
        (Fail(400), ErrorKind.BAD_REQUEST),
        (Drop(Reply(text="abc")), ErrorKind.CONNECTION),
        (Malformed(), ErrorKind.INVALID_RESPONSE),
    ],
)
async def test_scripted_model_failures(step: Any, kind: ErrorKind) -> None:
    with pytest.raises(ProviderError) as caught:
        await ScriptedModel([step]).complete(ask(), NullStream())
    assert caught.value.kind is kind
    if kind is ErrorKind.RATE_LIMIT:
        assert caught.value.retry_after == 2.0


async def test_scripted_model_drop_marks_output_started(recorder: RecordingStream) -> None:
    with pytest.raises(ProviderError) as caught:
        await ScriptedModel([Drop(Reply(text="abcdef", chunk_size=2), after_chunks=1)]).complete(
            ask(), recorder
        )
    assert caught.value.output_started and recorder.texts == ["ab"]


async def test_scripted_model_stall_is_cancellable() -> None:
    model = ScriptedModel([Stall(Reply(text="abc"), seconds=30)])
    task = asyncio.create_task(model.complete(ask(), NullStream()))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_scripted_model_exhausted_is_a_server_error() -> None:
    model = ScriptedModel([text("one")])
    await model.complete(ask(), NullStream())
    with pytest.raises(ProviderError) as caught:
        await model.complete(ask(), NullStream())
    assert caught.value.kind is ErrorKind.SERVER
    assert "exhausted" in caught.value.message


async def test_scripted_model_callable_step_gets_the_chat_body() -> None:
    seen: list[dict[str, Any]] = []

    def step(request: dict[str, Any]) -> Reply:
        seen.append(request)
        return text("ok")

    model = ScriptedModel([step], model="tiny")
    await model.complete(ask(), NullStream())
    assert seen[0]["model"] == "tiny" and seen[0]["messages"] == [SYSTEM, USER]
