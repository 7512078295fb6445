"""The Anthropic Messages client: history conversion (property-tested) and the official SDK
against the scripted provider, end to end."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import FOREVER, serving
from talaria.core import Message, ModelRequest, ModelResponse
from talaria.providers.errors import ErrorKind, ProviderError
from talaria.providers.wire.anthropic_adapter import build_body, convert_messages, replay_source
from talaria.providers.wire.anthropic_messages import AnthropicMessagesClient
from talaria.testing.script import Drop, Fail, Malformed, Reply, ScriptedCall, Stall
from talaria.testing.server import ScriptedProvider
from talaria.testing.wire_anthropic import AnthropicWire

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"the {name} tool",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for name in ("read_file", "search_files")
]
SOURCE = replay_source("http://127.0.0.1:9")


class Recorder:
    """A StreamHandler that keeps what it was given, in order."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.thoughts: list[str] = []
        self.calls: list[tuple[int, str, str]] = []
        self.arguments: list[tuple[int, str]] = []

    def text(self, delta: str) -> None:
        self.texts.append(delta)

    def reasoning(self, delta: str) -> None:
        self.thoughts.append(delta)

    def tool_call(self, index: int, call_id: str, name: str) -> None:
        self.calls.append((index, call_id, name))

    def tool_arguments(self, index: int, delta: str) -> None:
        self.arguments.append((index, delta))


# --------------------------------------------------------------- conversion, property-tested

words = st.text(alphabet="abc xyz", min_size=1, max_size=6).filter(str.strip)


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Repaired canonical histories: what the loop hands to an adapter."""
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(words)})
    ids = iter(range(1000))
    for _ in range(draw(st.integers(1, 4))):
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}
        content = draw(st.one_of(words, st.just([{"type": "text", "text": "look"}, image])))
        messages.append({"role": "user", "content": content})
        for _ in range(draw(st.integers(0, 2))):
            calls = [
                {
                    "id": f"call_{next(ids)}",
                    "type": "function",
                    "function": {
                        "name": "read_file",
                        "arguments": json.dumps({"path": draw(words)}),
                    },
                }
                for _ in range(draw(st.integers(1, 3)))
            ]
            text = draw(st.one_of(st.none(), st.just(""), words))
            messages.append({"role": "assistant", "content": text, "tool_calls": calls})
            for call in calls:
                result = draw(st.one_of(st.just(""), words))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        if draw(st.booleans()):
            reasoning = {
                "source": "anthropic_messages|http://elsewhere",
                "items": [{"type": "thinking", "thinking": "t", "signature": "foreign"}],
            }
            messages.append(
                {
                    "role": "assistant",
                    "content": draw(words),
                    "reasoning": "t",
                    "reasoning_details": reasoning,
                }
            )
    return messages


@settings(max_examples=200, deadline=None)
@given(histories(), st.sampled_from([None, "5m", "1h"]))
def test_every_repaired_history_becomes_a_request_the_api_accepts(
    messages: list[Message], ttl: str | None
) -> None:
    before = copy.deepcopy(messages)
    body = build_body(
        ModelRequest(messages=messages, tools=TOOLS, cache_ttl=ttl), model="claude-x", source=SOURCE
    )
    assert messages == before
    assert AnthropicWire().validate(body) == []
    assert body["max_tokens"] > 0


@settings(max_examples=200, deadline=None)
@given(histories())
def test_tool_results_are_grouped_in_call_order_and_no_text_is_lost(
    messages: list[Message],
) -> None:
    system, converted = convert_messages(messages, source=SOURCE)
    expected_results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    results = [
        block["tool_use_id"]
        for message in converted
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    assert results == expected_results

    def texts(items: list[Any]) -> list[str]:
        found = []
        for item in items:
            content = item.get("content")
            if isinstance(content, str) and content and item.get("role") != "tool":
                found.append(content)
            elif isinstance(content, list):
                found += [p["text"] for p in content if p.get("type") == "text" and p["text"]]
        return found

    sent = [b["text"] for b in system] + [
        block["text"]
        for message in converted
        for block in message["content"]
        if block["type"] == "text"
    ]
    assert sent == texts(messages)
    assert not any(b["type"] == "thinking" for m in converted for b in m["content"])


def test_tool_results_merge_before_the_text_of_a_following_user_message() -> None:
    calls = [
        {"id": f"t{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        for i in (1, 2)
    ]
    _, converted = convert_messages(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": calls},
            {"role": "tool", "tool_call_id": "t1", "content": "one"},
            {"role": "tool", "tool_call_id": "t2", "content": ""},
            {"role": "user", "content": "also this"},
        ],
        source=SOURCE,
    )
    assert [m["role"] for m in converted] == ["user", "assistant", "user"]
    assert converted[1]["content"] == [
        {"type": "tool_use", "id": "t1", "name": "read_file", "input": {}},
        {"type": "tool_use", "id": "t2", "name": "read_file", "input": {}},
    ]
    assert converted[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
        {"type": "tool_result", "tool_use_id": "t2"},
        {"type": "text", "text": "also this"},
    ]


def test_merged_messages_keep_the_order_the_api_demands() -> None:
    """Tool results before user text, thinking before an assistant's text, whatever came first."""
    call = {"id": "t1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    _, converted = convert_messages(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "first"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call],
                "reasoning_details": {"source": SOURCE, "items": [thinking]},
            },
            {"role": "user", "content": "typed while the tool ran"},
            {"role": "tool", "tool_call_id": "t1", "content": "done"},
        ],
        source=SOURCE,
    )
    assert [b["type"] for b in converted[1]["content"]] == ["thinking", "text", "tool_use"]
    assert [b["type"] for b in converted[2]["content"]] == ["tool_result", "text"]


# ------------------------------------------------------------------------ end to end


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[ScriptedProvider, AnthropicMessagesClient]]:
    with ScriptedProvider() as provider:
        client = AnthropicMessagesClient(
            "claude-sonnet-4-5", base_url=provider.anthropic_base_url, api_key="test-key"
        )
        yield provider, client
        await client.aclose()


def ask(*messages: Message, **request: Any) -> ModelRequest:
    return ModelRequest(messages=[{"role": "system", "content": "be brief"}, *messages], **request)


@pytest.mark.parametrize("stream", [True, False])
async def test_text_answer(endpoint: Any, stream: bool) -> None:
    provider, client = endpoint
    usage = {
        "input_tokens": 12,
        "output_tokens": 4,
        "cache_read_tokens": 30,
        "cache_write_tokens": 5,
    }
    provider.add(Reply(text="Hello there, friend", usage=usage, chunk_size=5))
    recorder = Recorder()
    response = await client.complete(
        ask({"role": "user", "content": "hi"}, stream=stream), recorder
    )
    assert response.text == "Hello there, friend"
    assert response.finish_reason == "stop"
    assert response.usage.to_dict()["total_tokens"] == 51
    assert (response.usage.input_tokens, response.usage.cache_read_tokens) == (12, 30)
    assert response.usage.cache_write_tokens == 5
    assert ("".join(recorder.texts), len(recorder.texts)) == (
        ("Hello there, friend", 4) if stream else ("", 0)
    )
    sent = provider.requests[0]
    assert sent.valid
    auth = sent.headers.get("x-api-key") or sent.headers.get("authorization", "")
    assert auth.endswith("test-key")
    assert sent.body["system"] == [{"type": "text", "text": "be brief"}]
    assert sent.body["max_tokens"] > 0


async def test_parallel_tool_calls_and_their_results_in_one_user_message(endpoint: Any) -> None:
    provider, client = endpoint
    provider.add(
        Reply(
            text="Reading both.",
            tool_calls=[
                ScriptedCall("read_file", {"path": "a.py"}, id="toolu_1"),
                ScriptedCall("search_files", {"path": "b"}, id="toolu_2"),
            ],
        ),
        Reply(text="Done."),
    )
    recorder = Recorder()
    history: list[Message] = [{"role": "user", "content": "read a and b"}]
    first = await client.complete(ask(*history, tools=TOOLS), recorder)
    assert first.finish_reason == "tool_calls"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in first.tool_calls] == [
        ("toolu_1", "read_file", {"path": "a.py"}),
        ("toolu_2", "search_files", {"path": "b"}),
    ]
    assert recorder.calls == [(0, "toolu_1", "read_file"), (1, "toolu_2", "search_files")]
    history += [
        first.to_message(),
        {"role": "tool", "tool_call_id": "toolu_1", "content": "print('a')"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "b.txt"},
    ]
    second = await client.complete(ask(*history, tools=TOOLS), recorder)
    assert second.text == "Done."
    last = provider.requests[-1].body["messages"][-1]
    assert last["role"] == "user"
    assert [(b["type"], b["tool_use_id"]) for b in last["content"]] == [
        ("tool_result", "toolu_1"),
        ("tool_result", "toolu_2"),
    ]
    assert not provider.invalid_requests


async def test_thinking_replays_to_the_endpoint_that_issued_it(endpoint: Any) -> None:
    provider, client = endpoint
    provider.add(Reply(text="42", reasoning="6 times 7", chunk_size=3), Reply(text="yes"))
    recorder = Recorder()
    history: list[Message] = [{"role": "user", "content": "6*7?"}]
    first = await client.complete(ask(*history), recorder)
    assert first.reasoning == "6 times 7" == "".join(recorder.thoughts)
    assert first.reasoning_details is not None
    assert first.reasoning_details["source"] == f"anthropic_messages|{provider.anthropic_base_url}"
    history += [first.to_message(), {"role": "user", "content": "sure?"}]
    await client.complete(ask(*history), recorder)
    replayed = provider.requests[-1].body["messages"][1]["content"]
    assert [b["type"] for b in replayed] == ["thinking", "text"]
    assert replayed[0]["signature"] == first.reasoning_details["items"][0]["signature"]
    assert not provider.invalid_requests


async def test_foreign_thinking_is_dropped_not_faked(endpoint: Any) -> None:
    provider, client = endpoint
    provider.add(Reply(text="ok"))
    foreign = {
        "role": "assistant",
        "content": "earlier answer",
        "reasoning": "private chain of thought",
        "reasoning_details": {
            "source": "anthropic_messages|https://api.anthropic.com",
            "items": [{"type": "thinking", "thinking": "x", "signature": "sig-from-elsewhere"}],
        },
    }
    history: list[Message] = [
        {"role": "user", "content": "q"},
        foreign,
        {"role": "user", "content": "again"},
    ]
    await client.complete(ask(*history), Recorder())
    sent = provider.requests[-1]
    assert sent.valid
    assert sent.body["messages"][1]["content"] == [{"type": "text", "text": "earlier answer"}]
    assert "private chain of thought" not in json.dumps(sent.body)


async def test_max_tokens_is_always_sent_including_the_tool_free_summary_call(
    endpoint: Any,
) -> None:
    provider, client = endpoint
    provider.add(Reply(text="a"), Reply(text="summary"), Reply(text="b"))
    user = {"role": "user", "content": "q"}
    await client.complete(ask(user, tools=TOOLS), Recorder())
    await client.complete(ask(user, tools=TOOLS, tool_choice="none"), Recorder())
    await client.complete(ask(user, max_tokens=77), Recorder())
    bodies = [request.body for request in provider.requests]
    assert all(request.valid for request in provider.requests)
    assert bodies[0]["max_tokens"] == bodies[1]["max_tokens"] > 0
    assert bodies[1]["tool_choice"] == {"type": "none"}
    assert bodies[1]["tools"] == bodies[0]["tools"]
    assert bodies[2]["max_tokens"] == 77


async def test_ten_turns_with_caching_stay_under_four_markers_with_a_stable_prefix(
    endpoint: Any,
) -> None:
    provider, client = endpoint
    history: list[Message] = []
    for turn in range(10):
        provider.add(
            Reply(tool_calls=[ScriptedCall("read_file", {"path": f"f{turn}"})]),
            Reply(text=f"answer {turn}"),
        )
        history.append({"role": "user", "content": f"question {turn} " * 20})
        for _ in range(2):
            response = await client.complete(ask(*history, tools=TOOLS, cache_ttl="5m"), Recorder())
            history.append(response.to_message())
            for call in response.tool_calls:
                history.append({"role": "tool", "tool_call_id": call.id, "content": "x " * 50})
    assert len(provider.requests) == 20 and not provider.invalid_requests
    prefixes = {json.dumps([r.body["tools"], r.body["system"]]) for r in provider.requests}
    assert len(prefixes) == 1
    for request in provider.requests:
        blocks = [*request.body["system"]] + [
            b for m in request.body["messages"] for b in m["content"]
        ]
        assert sum("cache_control" in b for b in blocks) == min(
            4, 1 + len(request.body["messages"])
        )
    assert response.usage.cache_read_tokens > response.usage.input_tokens


async def test_truncated_tool_arguments_keep_their_raw_text(endpoint: Any) -> None:
    provider, client = endpoint
    provider.add(
        Reply(tool_calls=[ScriptedCall("read_file", '{"path": "a.p')], finish_reason="length")
    )
    response = await client.complete(ask({"role": "user", "content": "q"}, tools=TOOLS), Recorder())
    assert response.finish_reason == "length"
    assert response.tool_calls[0].arguments == '{"path": "a.p'


async def test_refusal(endpoint: Any) -> None:
    provider, client = endpoint
    provider.add(Reply(refusal="I can't help with that."))
    response = await client.complete(ask({"role": "user", "content": "q"}), Recorder())
    assert (response.finish_reason, response.refusal) == ("refusal", "I can't help with that.")


@pytest.mark.parametrize(
    ("step", "stream", "kind"),
    [
        (Fail(429, "slow down", headers={"retry-after": "3"}), True, ErrorKind.RATE_LIMIT),
        (Fail(529, "Overloaded"), True, ErrorKind.OVERLOADED),
        (Fail(401, "invalid x-api-key"), False, ErrorKind.AUTH),
        (Fail(400, "prompt is too long: 250000 tokens > 200000"), True, ErrorKind.CONTEXT_OVERFLOW),
        (
            Drop(Reply(text="partial answer " * 5, chunk_size=4), after_chunks=5),
            True,
            ErrorKind.CONNECTION,
        ),
        (Malformed("{not json"), False, ErrorKind.INVALID_RESPONSE),
    ],
)
async def test_failures_become_provider_errors(
    endpoint: Any, step: Any, stream: bool, kind: ErrorKind
) -> None:
    provider, client = endpoint
    provider.add(step)
    with pytest.raises(ProviderError) as caught:
        await client.complete(ask({"role": "user", "content": "q"}, stream=stream), Recorder())
    assert caught.value.kind is kind
    assert (caught.value.provider, caught.value.model) == ("anthropic", "claude-sonnet-4-5")
    if kind is ErrorKind.RATE_LIMIT:
        assert caught.value.retry_after == 3
    if isinstance(step, Drop):
        assert caught.value.output_started


@pytest.mark.parametrize("stream", [True, False])
async def test_empty_and_reasoning_only_answers_come_back_as_they_are(
    endpoint: Any, stream: bool
) -> None:
    """Whether such an answer is usable is the loop's decision, the same for every wire."""
    provider, client = endpoint
    provider.add(Reply(text=None), Reply(text=None, reasoning="only thinking"))
    empty = await client.complete(ask({"role": "user", "content": "q"}, stream=stream), Recorder())
    thought = await client.complete(
        ask({"role": "user", "content": "q"}, stream=stream), Recorder()
    )
    assert (empty.text, empty.tool_calls, empty.reasoning) == (None, [], None)
    assert (thought.text, thought.reasoning) == (None, "only thinking")


def test_one_client_serves_successive_event_loops() -> None:
    import asyncio

    with ScriptedProvider([Reply(text="one"), Reply(text="two")]) as provider:
        client = AnthropicMessagesClient(
            "claude-x", base_url=provider.anthropic_base_url + "/", api_key="k"
        )
        request = ask({"role": "user", "content": "q"})
        answers: list[ModelResponse] = [
            asyncio.run(client.complete(request, Recorder())) for _ in range(2)
        ]
    assert [a.text for a in answers] == ["one", "two"]


def test_importing_the_client_does_not_import_the_sdk() -> None:
    code = (
        "import sys, talaria.providers.wire.anthropic_messages, talaria.providers.cache_markers;"
        "sys.exit('anthropic' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


async def test_an_error_event_inside_the_stream_is_classified() -> None:
    """Anthropic reports overload mid-stream as an ``error`` event after a 200."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    start = {"type": "message_start", "message": {"id": "m", "model": "x", "usage": {}}}
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    frames = b"".join(
        f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in (start, error)
    )

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(frames)))
            self.end_headers()
            self.wfile.write(frames)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as server:
        client = AnthropicMessagesClient(
            "claude-x", base_url=f"http://127.0.0.1:{server.server_address[1]}", api_key="k"
        )
        try:
            with pytest.raises(ProviderError) as caught:
                await client.complete(ask({"role": "user", "content": "q"}), Recorder())
        finally:
            await client.aclose()
    assert caught.value.kind is ErrorKind.OVERLOADED
    assert "Overloaded" in caught.value.message


async def test_thinking_config_is_sent_with_room_for_the_answer() -> None:
    with ScriptedProvider([Reply(text="ok", reasoning="r")]) as provider:
        client = AnthropicMessagesClient(
            "claude-x",
            base_url=provider.anthropic_base_url,
            api_key="k",
            max_tokens_default=1024,
            thinking={"type": "enabled", "budget_tokens": 2048},
        )
        request = ask({"role": "user", "content": "q"}, temperature=0.3)
        await client.complete(request, Recorder())
        await client.aclose()
    sent = provider.requests[0]
    assert sent.valid
    assert sent.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent.body["max_tokens"] > 2048
    assert "temperature" not in sent.body


@pytest.mark.timeout(60)
async def test_cancelling_a_stalled_stream_abandons_it_at_once(endpoint: Any) -> None:
    import asyncio

    provider, client = endpoint
    stalled = Stall(
        Reply(text="never finished " * 4, chunk_size=4), after_chunks=4, seconds=FOREVER
    )
    provider.add(stalled)
    recorder = Recorder()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(
            client.complete(ask({"role": "user", "content": "q"}), recorder), timeout=1.0
        )
    assert recorder.texts == ["neve"]
