"""The Anthropic Messages API (``POST /v1/messages``) as a `ModelClient`.

The official SDK provides auth headers, the HTTP client, error types and the SSE decoder, but
the body goes out prebuilt through its low-level ``post``: ``messages.create`` walks the whole
history on every call, which makes a long conversation quadratic. The SDK itself is imported
on the first call because importing it costs more than a second.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from talaria.providers.base import ModelRequest, ModelResponse, StreamHandler
from talaria.providers.errors import ErrorKind
from talaria.providers.profiles import ModelProfile, profile_for
from talaria.providers.resilience.classify import classify_http
from talaria.providers.transport.sdk import sdk_http_client
from talaria.providers.wire.anthropic_adapter import (
    API_MODE,
    Block,
    build_body,
    parse_message,
    replay_source,
)
from talaria.providers.wire.endpoint import EndpointClient

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic


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
        url = base_url.rstrip("/")
        super().__init__(
            model,
            base_url=url,
            provider=provider,
            sdk_factory=lambda: _sdk_client(url, api_key, timeout, default_headers),
        )
        self.max_tokens_default = max_tokens_default
        self.thinking = thinking
        self._source = replay_source(url)
        self.profile = profile or profile_for(
            provider=provider, model=model, base_url=url, api_mode=self.api_mode
        )

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
        self, client: AsyncAnthropic, body: dict[str, Any], reader: _Assembly, *, streaming: bool
    ) -> ModelResponse:
        response = await _post(client, body, streaming=streaming)
        try:
            if streaming:
                return await self._read_stream(response, reader)
            return self._read_message(await response.aread())
        finally:
            await response.aclose()

    def _read_message(self, raw: bytes) -> ModelResponse:
        try:
            data = json.loads(raw)
            content, usage = data["content"], data.get("usage") or {}
        except (ValueError, KeyError, TypeError) as exc:
            raise self._error(ErrorKind.INVALID_RESPONSE, f"not a message: {raw[:200]!r}") from exc
        if not isinstance(content, list):
            raise self._error(ErrorKind.INVALID_RESPONSE, "message content is not a list")
        return parse_message(
            content,
            data.get("stop_reason"),
            usage,
            source=self._source,
            model=data.get("model"),
            response_id=data.get("id"),
        )

    async def _read_stream(self, response: Any, assembly: _Assembly) -> ModelResponse:
        from anthropic import AsyncStream

        async for sse in AsyncStream.raw_events(response):
            if not sse.data or sse.event == "ping":
                continue
            try:
                event = json.loads(sse.data)
            except ValueError as exc:
                raise self._error(
                    ErrorKind.INVALID_RESPONSE, f"bad stream event: {sse.data[:200]}"
                ) from exc
            if event.get("type") == "error":
                raise classify_http(
                    None,
                    event,
                    {},
                    provider=self.provider,
                    model=self.model,
                    output_started=assembly.output_started,
                )
            assembly.feed(event)
            if assembly.finished:
                return assembly.response()
        raise self._error(
            ErrorKind.CONNECTION,
            "stream ended before message_stop",
            output_started=assembly.output_started,
        )


async def _post(client: AsyncAnthropic, body: dict[str, Any], *, streaming: bool) -> Any:
    """Send the prebuilt body as bytes: the SDK neither walks nor copies it."""
    import httpx2

    payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    return await client.post(
        "/v1/messages",
        cast_to=httpx2.Response,
        content=payload,
        options={"headers": {"Content-Type": "application/json"}},
        stream=streaming,
    )


def _sdk_client(
    base_url: str, api_key: str, timeout: float, headers: dict[str, str] | None
) -> AsyncAnthropic:
    """An ``AsyncAnthropic`` without SDK retries (talaria has its own retry layer).

    The SDK authenticates with ``Authorization: Bearer``; many Anthropic-compatible servers
    only read ``x-api-key``, so the key goes in both (Anthropic accepts either)."""
    import anthropic

    return anthropic.AsyncAnthropic(
        api_key=api_key,
        base_url=base_url,
        timeout=timeout,
        max_retries=0,
        default_headers={"x-api-key": api_key, **(headers or {})},
        http_client=sdk_http_client(anthropic, base_url),
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
