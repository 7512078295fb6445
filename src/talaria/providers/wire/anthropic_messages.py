"""The Anthropic Messages API (``POST /v1/messages``) as a `ModelClient`.

The body is built once and posted as is through the shared HTTP pool (the SDK's
``messages.create`` walked the whole history on every call); the stream's events are read as
plain dicts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from talaria.core import ModelRequest, ModelResponse, StreamHandler
from talaria.providers.errors import ErrorKind
from talaria.providers.profiles import ModelProfile
from talaria.providers.transport.auth import anthropic_endpoint
from talaria.providers.wire.anthropic_adapter import (
    API_MODE,
    Block,
    build_body,
    parse_message,
    replay_source,
)
from talaria.providers.wire.endpoint import EndpointClient


class AnthropicMessagesClient(EndpointClient["_Assembly"]):
    """One Anthropic-compatible endpoint and model; ``base_url`` excludes the ``/v1`` path."""

    api_mode = API_MODE

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str,
        provider: str = "anthropic",
        timeout: float = 600.0,
        default_headers: dict[str, str] | None = None,
        max_tokens_default: int | None = None,
        thinking: dict[str, Any] | None = None,
        profile: ModelProfile | None = None,
    ) -> None:
        endpoint = anthropic_endpoint(base_url, api_key, default_headers=default_headers)
        super().__init__(
            model, endpoint=endpoint, provider=provider, timeout=timeout, profile=profile
        )
        self.max_tokens_default = max_tokens_default
        self.thinking = thinking
        self._source = replay_source(base_url)

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        return build_body(
            request,
            model=self.model,
            source=self._source,
            profile=self.profile,
            max_tokens_default=self.max_tokens_default,
            thinking=self.thinking,
        )

    def _reader(self, stream: StreamHandler) -> _Assembly:
        return _Assembly(stream, self._source)

    async def _exchange(
        self, body: dict[str, Any], reader: _Assembly, *, streaming: bool
    ) -> ModelResponse:
        if not streaming:
            return self._read_message(await self._post("/v1/messages", body))
        async with self._events("/v1/messages", body) as events:
            async for event in events:
                reader.feed(event)
                if reader.finished:
                    return reader.response()
        raise self._error(
            ErrorKind.CONNECTION,
            "stream ended before message_stop",
            output_started=reader.output_started,
        )

    def _read_message(self, data: Any) -> ModelResponse:
        content = data.get("content") if isinstance(data, dict) else None
        if not isinstance(content, list):
            raise self._error(ErrorKind.INVALID_RESPONSE, f"not a message: {str(data)[:200]}")
        return parse_message(
            content,
            data.get("stop_reason"),
            data.get("usage") or {},
            source=self._source,
            model=data.get("model"),
            response_id=data.get("id"),
        )


class _Assembly:
    """Rebuilds the message from stream events and forwards deltas to the handler."""

    def __init__(self, handler: StreamHandler, source: str) -> None:
        self.handler = handler
        self.source = source
        self.blocks: dict[int, Block] = {}
        self.json_parts: dict[int, list[str]] = {}
        self.message: dict[str, Any] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.tool_calls = 0
        self.output_started = False
        self.finished = False
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "message_start": self._message_start,
            "content_block_start": self._block_start,
            "content_block_delta": self._block_delta,
            "message_delta": self._message_delta,
            "message_stop": self._message_stop,
        }

    def feed(self, event: dict[str, Any]) -> None:
        handler = self._handlers.get(event.get("type", ""))
        if handler is not None:
            handler(event)

    def response(self) -> ModelResponse:
        content = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block.get("type") == "tool_use":
                block["input"] = _tool_input("".join(self.json_parts.get(index, [])))
            content.append(block)
        return parse_message(
            content,
            self.stop_reason,
            self.usage,
            source=self.source,
            model=self.message.get("model"),
            response_id=self.message.get("id"),
        )

    def _message_start(self, event: dict[str, Any]) -> None:
        self.message = event.get("message") or {}
        self.usage = dict(self.message.get("usage") or {})

    def _block_start(self, event: dict[str, Any]) -> None:
        block = dict(event.get("content_block") or {})
        self.blocks[event["index"]] = block
        if block.get("type") == "tool_use":
            self.handler.tool_call(self.tool_calls, block.get("id", ""), block.get("name", ""))
            self.tool_calls += 1

    def _block_delta(self, event: dict[str, Any]) -> None:
        index, delta = event["index"], event.get("delta") or {}
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            self.output_started = True
            block["text"] = block.get("text", "") + delta.get("text", "")
            self.handler.text(delta.get("text", ""))
        elif kind == "thinking_delta":
            self.output_started = True
            block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            self.handler.reasoning(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.get("signature", "")
        elif kind == "input_json_delta":
            self.json_parts.setdefault(index, []).append(delta.get("partial_json", ""))
            self.handler.tool_arguments(max(0, self.tool_calls - 1), delta.get("partial_json", ""))

    def _message_delta(self, event: dict[str, Any]) -> None:
        self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
        self.usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})

    def _message_stop(self, event: dict[str, Any]) -> None:
        self.finished = True


def _tool_input(raw: str) -> dict[str, Any] | str:
    """The parsed input object; raw text when it does not parse (cut off by max_tokens)."""
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return raw
    return parsed if isinstance(parsed, dict) else raw
