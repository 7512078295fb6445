"""The OpenAI Responses API (``POST {base_url}/responses``) as a `ModelClient`.

Stateless on purpose (``store: false``, the full input every turn): the session store, not
the provider, owns the history, so a resumed or compressed session works anywhere. Reasoning
survives between turns as encrypted reasoning items, replayed only to the endpoint that
issued them. The body is built once and posted as is through the shared HTTP pool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from talaria.core import (
    Message,
    ModelRequest,
    ModelResponse,
    StreamHandler,
    ToolCall,
    Usage,
    tool_calls_of,
)
from talaria.providers.errors import ErrorKind, ProviderError
from talaria.providers.profiles import ModelProfile
from talaria.providers.transport.auth import openai_endpoint
from talaria.providers.wire.chat_completions import tool_fields
from talaria.providers.wire.endpoint import EndpointClient

API_MODE = "codex_responses"

ERROR_CODE_KINDS = {
    "rate_limit_exceeded": ErrorKind.RATE_LIMIT,
    "server_error": ErrorKind.SERVER,
    "context_length_exceeded": ErrorKind.CONTEXT_OVERFLOW,
    "invalid_prompt": ErrorKind.BAD_REQUEST,
    "vector_store_timeout": ErrorKind.TIMEOUT,
}
"""Error codes reported inside a 200 stream (``error`` / ``response.failed`` events)."""

_INCOMPLETE_FINISH = {"max_output_tokens": "length", "content_filter": "content_filter"}
_REPLAYED_REASONING_KEYS = ("type", "id", "summary", "content", "encrypted_content")


def replay_source(base_url: str) -> str:
    """The tag that marks reasoning replay state as issued by this endpoint."""
    return f"{API_MODE}|{base_url.rstrip('/')}"


def wants_reasoning(profile: ModelProfile, body: dict[str, Any]) -> bool:
    """True when the call reasons: a reasoning model, or reasoning asked for explicitly."""
    return "reasoning" in body or profile.encrypted_reasoning


class ResponsesClient(EndpointClient["_Assembly"]):
    """One Responses-API endpoint and model; ``base_url`` includes the version path (``/v1``)."""

    api_mode = API_MODE

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str,
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
        self.extra_body = dict(extra_body or {})
        self._source = replay_source(base_url)

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        instructions, items = to_input(request.messages, self._source)
        body: dict[str, Any] = {"model": self.model}
        if instructions:
            body["instructions"] = instructions
        tools = [to_tool(schema) for schema in request.tools]
        body.update(tool_fields(tools, request.tool_choice, self.profile))
        body.update(input=items, store=False, stream=request.stream)
        if request.max_tokens:
            body[self.profile.output_limit_field] = request.max_tokens
        if request.temperature is not None and self.profile.supports_temperature:
            body["temperature"] = request.temperature
        body.update(self.extra_body)
        body.update(request.extra_body or {})
        if wants_reasoning(self.profile, body):
            include = list(body.get("include") or [])
            if "reasoning.encrypted_content" not in include:
                include.append("reasoning.encrypted_content")
            body["include"] = include
        return body

    def _reader(self, stream: StreamHandler) -> _Assembly:
        return _Assembly(stream, self._error)

    async def _exchange(
        self, body: dict[str, Any], reader: _Assembly, *, streaming: bool
    ) -> ModelResponse:
        if not streaming:
            return self._parsed(await self._post("/responses", body))
        async with self._events("/responses", body) as events:
            async for event in events:
                reader.feed(event)
                if reader.final is not None:
                    return self._parsed(reader.final, reader.items)
        raise self._error(
            ErrorKind.CONNECTION,
            "stream ended before response.completed",
            output_started=reader.output_started,
        )

    def _parsed(self, data: Any, streamed_items: dict[int, Any] | None = None) -> ModelResponse:
        if not isinstance(data, dict) or not isinstance(data.get("output", []), list):
            raise self._error(ErrorKind.INVALID_RESPONSE, f"not a response: {str(data)[:200]}")
        if data.get("status") == "failed":
            raise failure(self._error, data.get("error"), body=data)
        streamed = streamed_items or {}
        output = data.get("output") or [streamed[index] for index in sorted(streamed)]
        return parse_output(output, data, self._source)


class _Assembly:
    """Forwards stream deltas to the handler and keeps what the final parse needs."""

    def __init__(self, handler: StreamHandler, error: Callable[..., ProviderError]) -> None:
        self.handler = handler
        self.error = error
        self.items: dict[int, Any] = {}
        self.final: dict[str, Any] | None = None
        self.output_started = False
        self.tool_calls = 0
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "response.output_item.added": self._item_added,
            "response.output_item.done": self._item_done,
            "response.output_text.delta": self._text,
            "response.function_call_arguments.delta": self._arguments,
            "response.reasoning_summary_part.added": self._summary_part,
            "response.reasoning_summary_text.delta": self._reasoning,
            "response.reasoning_text.delta": self._reasoning,
            "response.completed": self._finished,
            "response.incomplete": self._finished,
            "response.failed": self._failed,
            "error": self._error_event,
        }

    def feed(self, event: Any) -> None:
        if not isinstance(event, dict):
            raise self.error(ErrorKind.INVALID_RESPONSE, f"bad stream event: {str(event)[:200]}")
        handler = self._handlers.get(str(event.get("type")))
        if handler is not None:
            handler(event)

    def _item_added(self, event: dict[str, Any]) -> None:
        item = event.get("item") or {}
        if item.get("type") == "function_call":
            self.handler.tool_call(self.tool_calls, item.get("call_id", ""), item.get("name", ""))
            self.tool_calls += 1

    def _arguments(self, event: dict[str, Any]) -> None:
        self.handler.tool_arguments(max(0, self.tool_calls - 1), str(event.get("delta", "")))

    def _item_done(self, event: dict[str, Any]) -> None:
        self.items[int(event.get("output_index", len(self.items)))] = event.get("item") or {}

    def _text(self, event: dict[str, Any]) -> None:
        self.output_started = True
        self.handler.text(str(event.get("delta", "")))

    def _summary_part(self, event: dict[str, Any]) -> None:
        if event.get("summary_index", 0) > 0:
            self.handler.reasoning("\n\n")

    def _reasoning(self, event: dict[str, Any]) -> None:
        self.handler.reasoning(str(event.get("delta", "")))

    def _finished(self, event: dict[str, Any]) -> None:
        self.final = event.get("response") or {}

    def _failed(self, event: dict[str, Any]) -> None:
        error = (event.get("response") or {}).get("error")
        raise failure(self.error, error, body=event, output_started=self.output_started)

    def _error_event(self, event: dict[str, Any]) -> None:
        raise failure(self.error, event, body=event, output_started=self.output_started)


def failure(
    make: Callable[..., ProviderError], error: Any, *, body: Any, output_started: bool = False
) -> ProviderError:
    """The `ProviderError` for a failure reported inside a 200 answer (``{code, message}``)."""
    error = error if isinstance(error, dict) else {}
    code = str(error.get("code") or "")
    message = str(error.get("message") or code or "the response failed")
    kind = ERROR_CODE_KINDS.get(code, ErrorKind.SERVER)
    return make(kind, message, body=body, output_started=output_started)


# Canonical history -> Responses input.


def to_input(messages: list[Message], source: str) -> tuple[str | None, list[dict[str, Any]]]:
    """Instructions (the leading system message) and the input items for the rest."""
    instructions: str | None = None
    items: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "system" and index == 0:
            instructions = _text_of(message.get("content"))
            continue
        _CONVERTERS.get(str(role), _convert_other)(message, source, items)
    return instructions, items


def to_tool(schema: dict[str, Any]) -> dict[str, Any]:
    """A chat-style function schema, flattened; strict only when the schema asks for it."""
    function = schema.get("function", schema)
    tool: dict[str, Any] = {"type": "function", "name": function["name"]}
    if function.get("description"):
        tool["description"] = function["description"]
    tool["parameters"] = function.get("parameters") or {"type": "object", "properties": {}}
    tool["strict"] = bool(function.get("strict", False))
    return tool


def _convert_user(message: Message, source: str, items: list[dict[str, Any]]) -> None:
    content: Any = message.get("content")
    if isinstance(content, list):
        content = [_PART_CONVERTERS.get(part.get("type"), _same)(part) for part in content]
    items.append({"type": "message", "role": "user", "content": content or ""})


def _convert_assistant(message: Message, source: str, items: list[dict[str, Any]]) -> None:
    text = _text_of(message.get("content"))
    calls = tool_calls_of(message)
    if not text and not calls:
        return
    details = message.get("reasoning_details")
    if isinstance(details, dict) and details.get("source") == source:
        for item in details.get("items") or []:
            items.append({k: item[k] for k in _REPLAYED_REASONING_KEYS if item.get(k) is not None})
    if text:
        content = [{"type": "output_text", "text": text}]
        items.append({"type": "message", "role": "assistant", "content": content})
    for call in calls:
        function = call.get("function") or {}
        items.append(
            {
                "type": "function_call",
                "call_id": call.get("id"),
                "name": function.get("name"),
                "arguments": function.get("arguments") or "{}",
            }
        )


def _convert_tool(message: Message, source: str, items: list[dict[str, Any]]) -> None:
    output = _text_of(message.get("content")) or ""
    items.append(
        {"type": "function_call_output", "call_id": message.get("tool_call_id"), "output": output}
    )


def _convert_other(message: Message, source: str, items: list[dict[str, Any]]) -> None:
    """A later system message: the Responses API calls mid-conversation instructions developer."""
    text = _text_of(message.get("content")) or ""
    items.append({"type": "message", "role": "developer", "content": text})


_CONVERTERS: dict[str, Callable[[Message, str, list[dict[str, Any]]], None]] = {
    "user": _convert_user,
    "assistant": _convert_assistant,
    "tool": _convert_tool,
}


def _same(part: Mapping[str, Any]) -> Mapping[str, Any]:
    return part


def _image_part(part: Mapping[str, Any]) -> Mapping[str, Any]:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    detail = image.get("detail", "auto") if isinstance(image, dict) else "auto"
    return {"type": "input_image", "image_url": url, "detail": detail}


def _file_part(part: Mapping[str, Any]) -> Mapping[str, Any]:
    return {"type": "input_file", **(part.get("file") or {})}


_PART_CONVERTERS: dict[Any, Callable[[Mapping[str, Any]], Mapping[str, Any]]] = {
    "text": lambda part: {"type": "input_text", "text": part.get("text", "")},
    "image_url": _image_part,
    "file": _file_part,
}


def _text_of(content: Any) -> str | None:
    if isinstance(content, list):
        return (
            "".join(str(part.get("text", "")) for part in content if isinstance(part, dict)) or None
        )
    return content if isinstance(content, str) else None


# Responses output -> ModelResponse.


def parse_output(output: list[Any], data: dict[str, Any], source: str) -> ModelResponse:
    """The canonical answer from a response's output items and its envelope."""
    texts: list[str] = []
    refusals: list[str] = []
    summaries: list[str] = []
    calls: list[ToolCall] = []
    replay: list[dict[str, Any]] = []
    for item in output:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    texts.append(str(part.get("text", "")))
                elif part.get("type") == "refusal":
                    refusals.append(str(part.get("refusal", "")))
        elif kind == "function_call":
            calls.append(
                ToolCall(str(item.get("call_id")), str(item.get("name")), item.get("arguments", ""))
            )
        elif kind == "reasoning":
            summaries.extend(_reasoning_texts(item))
            if item.get("encrypted_content"):
                replay.append(item)
    text = "".join(texts) or None
    refusal = "".join(refusals) or None
    return ModelResponse(
        text=text,
        tool_calls=calls,
        reasoning="\n\n".join(summaries) or None,
        reasoning_details={"source": source, "items": replay} if replay else None,
        finish_reason=_finish_reason(data, calls, text, refusal),
        refusal=refusal,
        usage=parse_usage(data.get("usage") or {}),
        model=data.get("model"),
        response_id=data.get("id"),
    )


def _reasoning_texts(item: dict[str, Any]) -> list[str]:
    """Summary texts, or the raw reasoning text where a server sends that instead."""
    summary = [str(part.get("text", "")) for part in item.get("summary") or []]
    raw = [str(part.get("text", "")) for part in item.get("content") or []]
    return [text for text in summary or raw if text]


def _finish_reason(
    data: dict[str, Any], calls: list[ToolCall], text: str | None, refusal: str | None
) -> str:
    if data.get("status") == "incomplete":
        reason = (data.get("incomplete_details") or {}).get("reason")
        if reason in _INCOMPLETE_FINISH:
            return _INCOMPLETE_FINISH[reason]
    if calls:
        return "tool_calls"
    return "refusal" if refusal and not text else "stop"


def parse_usage(raw: dict[str, Any]) -> Usage:
    """OpenAI counts cached input inside ``input_tokens``; talaria's buckets are disjoint."""
    details = raw.get("input_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0)
    written = int(details.get("cache_write_tokens") or 0)
    total = int(raw.get("input_tokens") or 0)
    return Usage(
        input_tokens=max(0, total - cached - written),
        output_tokens=int(raw.get("output_tokens") or 0),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        reasoning_tokens=int((raw.get("output_tokens_details") or {}).get("reasoning_tokens") or 0),
    )
