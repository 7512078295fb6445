"""The official SDKs as oracles (CONTRIBUTING.md): talaria no longer runs them, but what it sends
must be what they would accept, and what it reads must be what they would read.

For each wire API a two-call conversation runs against the scripted provider: a first answer
with reasoning and a tool call, then a history that carries it (an image, a tool result, the
replayed reasoning, cache markers). Each body talaria sent is validated against the SDK's own
request type; each streamed answer is parsed again by the SDK's own stream accumulator, which
must find the same text and tool calls talaria found.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pytest
from pydantic import TypeAdapter

from talaria.core import Message, ModelRequest, ModelResponse
from talaria.providers.factory import ProviderSpec, build_client
from talaria.testing import Reply, ScriptedProvider
from talaria.testing.script import ScriptedCall

ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQ"
    + "GAhKmMIQAAAABJRU5ErkJggg=="
)
FIRST = Reply(reasoning="the user wants a sum", tool_calls=[ScriptedCall("add", {"a": 2, "b": 3})])
SECOND = Reply(text="2 + 3 is 5, as the tool said.")

MODES = {
    "chat_completions": "claude-sonnet-4-5",  # Claude over OpenAI format: cache markers too
    "codex_responses": "gpt-5-codex",  # a reasoning model: encrypted reasoning replayed
    "anthropic_messages": "claude-sonnet-4-5",  # thinking blocks with signatures replayed
}
CHAT_EXTENSIONS = frozenset({"cache_control"})
"""Keys talaria sends over Chat Completions that OpenAI's types do not list: the prompt-cache
markers OpenRouter and Anthropic-compatible servers read on content parts."""


class _Null:
    def text(self, delta: str) -> None: ...
    def reasoning(self, delta: str) -> None: ...
    def tool_call(self, index: int, call_id: str, name: str) -> None: ...
    def tool_arguments(self, index: int, delta: str) -> None: ...


def _history() -> list[Message]:
    return [
        {"role": "system", "content": "You add numbers with the add tool."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is 2 + 3? Here is a picture of it."},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}},
            ],
        },
    ]


async def _conversation(
    server: ScriptedProvider, mode: str
) -> tuple[list[dict[str, Any]], list[ModelResponse]]:
    """Two calls of one turn; the bodies the server received and talaria's two answers."""
    url = server.anthropic_base_url if mode == "anthropic_messages" else server.openai_base_url
    client = build_client(ProviderSpec("scripted", MODES[mode], url, "test-key", mode))
    history = _history()
    answers = []
    for _ in range(2):
        request = ModelRequest(messages=list(history), tools=[ADD], cache_ttl="5m")
        answer = await client.complete(request, _Null())
        answers.append(answer)
        history.append(answer.to_message())
        for call in answer.tool_calls:
            history.append({"role": "tool", "tool_call_id": call.id, "content": "5"})
    return [r.body for r in server.requests], answers


def _request_type(mode: str) -> Any:
    if mode == "chat_completions":
        from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming

        return CompletionCreateParamsStreaming
    if mode == "codex_responses":
        from openai.types.responses.response_create_params import (
            ResponseCreateParamsStreaming,
        )

        return ResponseCreateParamsStreaming
    from anthropic.types.message_create_params import MessageCreateParamsStreaming

    return MessageCreateParamsStreaming


def _plain(value: Any) -> Any:
    """The validated value as plain data; lazy iterables are consumed (which validates them)."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (Iterator, list, tuple)):
        return [_plain(item) for item in value]
    return value


def _dropped(sent: Any, kept: Any, path: str = "") -> Iterable[str]:
    """Keys of ``sent`` that validation dropped: the SDK's type does not know them."""
    if isinstance(sent, dict) and isinstance(kept, dict):
        for key, value in sent.items():
            if key not in kept:
                yield f"{path}.{key}"
            else:
                yield from _dropped(value, kept[key], f"{path}.{key}")
    elif isinstance(sent, list) and isinstance(kept, list):
        for index, (a, b) in enumerate(zip(sent, kept, strict=True)):
            yield from _dropped(a, b, f"{path}[{index}]")


@pytest.mark.parametrize("mode", list(MODES))
async def test_every_body_talaria_sends_is_a_valid_sdk_request(mode: str) -> None:
    with ScriptedProvider([FIRST, SECOND]) as server:
        bodies, _ = await _conversation(server, mode)
    adapter = TypeAdapter(_request_type(mode))
    for body in bodies:
        kept = _plain(adapter.validate_python(body))
        unknown = {path for path in _dropped(body, kept)}
        allowed = {p for p in unknown if p.rsplit(".", 1)[-1] in CHAT_EXTENSIONS}
        assert unknown == (allowed if mode == "chat_completions" else set()), unknown
    second = json.dumps(bodies[1])
    assert PIXEL in second
    if mode != "codex_responses":  # the Responses API caches prompts without markers
        assert '"cache_control"' in second
    replayed = {"codex_responses": "encrypted_content", "anthropic_messages": "signature"}
    if mode in replayed:
        assert replayed[mode] in second, "the first answer's reasoning was not replayed"


async def _sdk_read(server: ScriptedProvider, mode: str, body: dict[str, Any]) -> tuple[str, Any]:
    """The same request sent by the SDK, the answer read by the SDK's own accumulator:
    (text, [(tool name, parsed arguments)])."""
    if mode == "anthropic_messages":
        import anthropic

        client = anthropic.AsyncAnthropic(base_url=server.anthropic_base_url, api_key="k")
        async with client.messages.stream(**_without(body, "stream")) as stream:
            message = await stream.get_final_message()
        await client.close()
        text = "".join(b.text for b in message.content if b.type == "text")
        return text, [(b.name, b.input) for b in message.content if b.type == "tool_use"]
    import openai

    oai = openai.AsyncOpenAI(base_url=server.openai_base_url, api_key="k", max_retries=0)
    if mode == "codex_responses":
        async with oai.responses.stream(**_without(body, "stream")) as events:
            response = await events.get_final_response()
        await oai.close()
        items = [item for item in response.output if item.type == "function_call"]
        return response.output_text, [(i.name, json.loads(i.arguments)) for i in items]
    async with oai.chat.completions.stream(**_without(body, "stream")) as chunks:
        completion = await chunks.get_final_completion()
    await oai.close()
    message = completion.choices[0].message
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]
    return message.content or "", calls


def _without(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key not in keys}


@pytest.mark.parametrize("mode", list(MODES))
async def test_the_sdks_read_the_same_answers_talaria_read(mode: str) -> None:
    with ScriptedProvider([FIRST, SECOND, FIRST, SECOND]) as server:
        bodies, answers = await _conversation(server, mode)
        for body, answer in zip(bodies, answers, strict=True):
            text, calls = await _sdk_read(server, mode, body)
            ours = [(call.name, json.loads(call.arguments)) for call in answer.tool_calls]
            assert (answer.text or "", ours) == (text, calls)
    assert [a.text for a in answers] == [None, SECOND.text]
    assert [c.name for c in answers[0].tool_calls] == ["add"]
