"""The OpenAI Chat Completions adapter (OpenAI, OpenRouter, vLLM, llama.cpp, Ollama, ...).

Canonical history is already Chat Completions shaped, so building the request is a key filter.
Answers are read as plain dicts (no per-chunk pydantic models): inline ``<think>`` reasoning is
split off, streamed tool calls are assembled by index, usage is put in talaria's disjoint buckets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from talaria.core import Message, ModelRequest, ModelResponse, StreamHandler, ToolCall, Usage
from talaria.messages.think import ThinkSplitter, strip_think
from talaria.providers.cache_markers import apply_openai_format_cache_markers
from talaria.providers.errors import ErrorKind, ProviderError
from talaria.providers.profiles import ModelProfile
from talaria.providers.transport.auth import openai_endpoint
from talaria.providers.wire.endpoint import EndpointClient

WIRE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")
"""The message keys the API knows; reasoning and replay state are ours and never sent."""
TOOL_RESULT_KEYS = ("role", "content", "tool_call_id")
"""A tool result takes no `name`: strict endpoints reject it there."""
_WIRE_KEYSET = frozenset(WIRE_KEYS)
_TOOL_RESULT_KEYSET = frozenset(TOOL_RESULT_KEYS)
DEFAULT_PROFILE = ModelProfile()
"""A compatible server with no known quirks."""

FINISH_REASONS = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "max_tokens": "length",
    "content_filter": "content_filter",
}


class ChatCompletionsClient(EndpointClient["_StreamReader"]):
    """A `ModelClient` for one Chat Completions endpoint and model."""

    api_mode = "chat_completions"

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None,
        provider: str = "openai",
        timeout: float = 600.0,
        default_headers: dict[str, str] | None = None,
        extra_body: dict[str, Any] | None = None,
        profile: ModelProfile | None = None,
    ) -> None:
        endpoint = openai_endpoint(
            base_url, api_key, provider=provider, default_headers=default_headers
        )
        super().__init__(
            model, endpoint=endpoint, provider=provider, timeout=timeout, profile=profile
        )
        self.extra_body = extra_body

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        return build_body(request, self.model, self.extra_body, self.profile)

    def _reader(self, stream: StreamHandler) -> _StreamReader:
        return _StreamReader(stream)

    async def _exchange(
        self, body: dict[str, Any], reader: _StreamReader, *, streaming: bool
    ) -> ModelResponse:
        if not streaming:
            return parse_completion(await self._post("/chat/completions", body))
        async with self._events("/chat/completions", body, reader.saw_done) as chunks:
            async for chunk in chunks:
                reader.feed(chunk)
        if reader.cut_off:  # what a proxy's timeout leaves: retried as the other modes do
            raise self._error(
                ErrorKind.CONNECTION,
                "stream ended before a finish_reason or [DONE]",
                output_started=reader.output_started,
            )
        return reader.finish()


def build_body(
    request: ModelRequest,
    model: str,
    extra_body: dict[str, Any] | None = None,
    profile: ModelProfile = DEFAULT_PROFILE,
) -> dict[str, Any]:
    """The JSON body for one call, built directly (no SDK transform), as `profile` says."""
    messages = [wire_message(message) for message in request.messages]
    if request.cache_ttl and profile.cache_markers:
        messages = apply_openai_format_cache_markers(messages, request.cache_ttl)
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": request.stream}
    if request.stream and profile.stream_usage:
        body["stream_options"] = {"include_usage": True}
    body.update(tool_fields(request.tools, request.tool_choice, profile))
    if request.max_tokens is not None:
        body[profile.output_limit_field] = request.max_tokens
    if request.temperature is not None and profile.supports_temperature:
        body["temperature"] = request.temperature
    body.update(extra_body or {})
    body.update(request.extra_body or {})
    return body


def tool_fields(
    tools: list[dict[str, Any]], tool_choice: str, profile: ModelProfile
) -> dict[str, Any]:
    """``tools``, ``tool_choice`` and ``parallel_tool_calls`` as the endpoint takes them (both
    OpenAI wire APIs); an endpoint without ``tool_choice`` is offered no tools when none may be
    called."""
    if not tools or (tool_choice == "none" and not profile.supports_tool_choice):
        return {}
    fields: dict[str, Any] = {"tools": tools}
    if profile.supports_tool_choice:
        fields["tool_choice"] = tool_choice
    if profile.parallel_tool_calls is not None:
        fields["parallel_tool_calls"] = profile.parallel_tool_calls
    return fields


def wire_message(message: Message) -> Mapping[str, Any]:
    """A canonical message with only the keys the API accepts: the message itself when it
    has no others (most do; a body is encoded, never changed, so sharing is safe and the
    history is not copied at every step)."""
    tool = message.get("role") == "tool"
    if message.keys() <= (_TOOL_RESULT_KEYSET if tool else _WIRE_KEYSET):
        return message
    fields: Mapping[str, Any] = message
    keys = TOOL_RESULT_KEYS if tool else WIRE_KEYS
    return {key: fields[key] for key in keys if key in fields}


def usage_from_openai(usage: dict[str, Any] | None) -> Usage:
    """OpenAI-convention usage (prompt_tokens includes cached tokens) in disjoint buckets."""
    if not usage:
        return Usage()
    prompt_details = usage.get("prompt_tokens_details") or {}
    output_details = usage.get("completion_tokens_details") or {}
    cached = int(prompt_details.get("cached_tokens") or 0)
    written = int(
        prompt_details.get("cache_write_tokens") or usage.get("cache_creation_input_tokens") or 0
    )
    prompt = int(usage.get("prompt_tokens") or 0)
    return Usage(
        input_tokens=max(0, prompt - cached - written),
        output_tokens=int(usage.get("completion_tokens") or 0),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        reasoning_tokens=int(output_details.get("reasoning_tokens") or 0),
    )


def parse_completion(data: Any) -> ModelResponse:
    """A non-streaming ``chat.completion`` answer."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise _invalid(data)
    message = choices[0].get("message") or {}
    visible, tagged = strip_think(message.get("content") or "")
    if tagged:
        visible = visible.lstrip()
    field_reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    calls = [
        ToolCall(
            id=call.get("id") or f"call_{index}",
            name=(call.get("function") or {}).get("name") or "",
            arguments=(call.get("function") or {}).get("arguments") or "",
        )
        for index, call in enumerate(message.get("tool_calls") or [])
    ]
    refusal = message.get("refusal") or None
    return ModelResponse(
        text=visible or None,
        tool_calls=calls,
        reasoning=(field_reasoning + tagged) or None,
        finish_reason=_finish(choices[0].get("finish_reason"), bool(calls), refusal),
        refusal=refusal,
        usage=usage_from_openai(data.get("usage")),
        model=data.get("model"),
        response_id=data.get("id"),
    )


@dataclass
class _PartialCall:
    """A tool call whose pieces are still streaming in."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    announced: bool = False


class _StreamReader:
    """Accumulates ``chat.completion.chunk`` dicts and forwards deltas to the handler."""

    def __init__(self, handler: StreamHandler) -> None:
        self.handler = handler
        self.output_started = False
        self._splitter = ThinkSplitter()
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, _PartialCall] = {}
        self._after_think = False
        self._finish: str | None = None
        self._usage: dict[str, Any] | None = None
        self._model: str | None = None
        self._id: str | None = None
        self._saw_choice = False
        self._done = False

    def saw_done(self) -> None:
        self._done = True

    @property
    def cut_off(self) -> bool:
        """The answer began but the stream stopped with neither a finish_reason nor ``[DONE]``:
        it may be incomplete (a finished one ends with at least one of them). A stream with no
        answer at all is an invalid response (`finish`)."""
        return self._saw_choice and self._finish is None and not self._done

    def feed(self, chunk: Any) -> None:
        if not isinstance(chunk, dict):
            raise _invalid(chunk)
        self._model = chunk.get("model") or self._model
        self._id = chunk.get("id") or self._id
        self._usage = chunk.get("usage") or self._usage
        for choice in chunk.get("choices") or []:
            self._saw_choice = True
            delta = choice.get("delta") or {}
            self._on_reasoning(delta.get("reasoning_content") or delta.get("reasoning") or "")
            if delta.get("content"):
                self._on_content(*self._splitter.feed(delta["content"]))
            if delta.get("refusal"):
                self._refusal.append(delta["refusal"])
            for position, call in enumerate(delta.get("tool_calls") or []):
                self._on_tool_call(call, position)
            self._finish = choice.get("finish_reason") or self._finish

    def finish(self) -> ModelResponse:
        if not self._saw_choice:
            raise _invalid("the stream ended without any choices")
        self._on_content(*self._splitter.flush())
        calls = [
            ToolCall(id=p.id or f"call_{index}", name=p.name, arguments="".join(p.arguments))
            for index, p in sorted(self._calls.items())
        ]
        refusal = "".join(self._refusal) or None
        return ModelResponse(
            text="".join(self._text) or None,
            tool_calls=calls,
            reasoning="".join(self._reasoning) or None,
            finish_reason=_finish(self._finish, bool(calls), refusal),
            refusal=refusal,
            usage=usage_from_openai(self._usage),
            model=self._model,
            response_id=self._id,
        )

    def _on_reasoning(self, delta: str) -> None:
        if delta:
            self._reasoning.append(delta)
            self.output_started = True
            self.handler.reasoning(delta)

    def _on_content(self, visible: str, reasoning: str) -> None:
        if reasoning or self._splitter.in_reasoning:
            self._after_think = True
        self._on_reasoning(reasoning)
        if self._after_think and not self._text:
            visible = visible.lstrip()
        if visible:
            self._text.append(visible)
            self.output_started = True
            self.handler.text(visible)

    def _on_tool_call(self, call: dict[str, Any], position: int) -> None:
        index = call.get("index", position)
        partial = self._calls.setdefault(index, _PartialCall())
        partial.id = call.get("id") or partial.id
        function = call.get("function") or {}
        partial.name = partial.name or function.get("name") or ""
        if partial.name and not partial.announced:
            partial.announced = True
            self.handler.tool_call(index, partial.id or f"call_{index}", partial.name)
        if function.get("arguments"):
            partial.arguments.append(function["arguments"])
            self.handler.tool_arguments(index, function["arguments"])


def _finish(raw: str | None, has_calls: bool, refusal: str | None) -> str:
    if refusal:
        return "refusal"
    reason = FINISH_REASONS.get(raw or "", "stop")
    return "tool_calls" if has_calls and reason == "stop" else reason


def _invalid(data: Any) -> ProviderError:
    shown = data if isinstance(data, str) else repr(data)
    return ProviderError(
        f"not a chat completion: {' '.join(shown.split())[:200]}",
        kind=ErrorKind.INVALID_RESPONSE,
        body=data,
    )
