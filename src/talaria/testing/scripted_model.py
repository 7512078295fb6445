"""`ScriptedModel`: an in-process `ModelClient` that answers from a script (no HTTP).

It behaves like a real adapter as seen from the loop: strict history validation (the Chat
Completions rules), streamed deltas, failures raised as `ProviderError` of the right kind, and
delays that cancellation interrupts. Callable steps receive the Chat Completions request body,
the same one `ScriptedProvider` passes them, so a script moves between the two unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Any

from talaria.core import ModelRequest, ModelResponse, StreamHandler, ToolCall, Usage
from talaria.messages.think import strip_think
from talaria.providers.errors import ErrorKind, ProviderError
from talaria.providers.resilience.classify import classify_http
from talaria.providers.wire.chat_completions import build_body
from talaria.testing.script import (
    Drop,
    Endless,
    Fail,
    Malformed,
    Reply,
    Script,
    ScriptExhausted,
    Stall,
    Step,
    StepSource,
)
from talaria.testing.wire_base import arguments_text, finish_reason, pieces, usage_buckets
from talaria.testing.wire_chat import WIRE as CHAT_WIRE


class ScriptedModel:
    """A scripted `ModelClient`; ``requests`` records every request it was asked, in order."""

    def __init__(
        self,
        steps: list[StepSource] | Script | None = None,
        *,
        model: str = "scripted-model",
        provider: str = "scripted",
        api_mode: str = "chat_completions",
        strict: bool = True,
        base_url: str = "scripted://local",
    ) -> None:
        self.script = steps if isinstance(steps, Script) else Script(steps)
        self.model = model
        self.provider = provider
        self.api_mode = api_mode
        self.base_url = base_url
        self.strict = strict
        self.requests: list[ModelRequest] = []
        self.closed = False

    def add(self, *steps: StepSource) -> None:
        self.script.add(*steps)

    async def complete(self, request: ModelRequest, stream: StreamHandler) -> ModelResponse:
        self.requests.append(request)
        body = build_body(request, self.model)
        if self.strict:
            problems = CHAT_WIRE.validate(body)
            if problems:
                raise self._error("; ".join(problems), ErrorKind.BAD_REQUEST, status=400)
        try:
            step = self.script.next(body)
        except ScriptExhausted as exc:
            raise self._error(str(exc), ErrorKind.SERVER, status=500) from exc
        return await self._play(step, body, stream if request.stream else None)

    async def aclose(self) -> None:
        self.closed = True

    async def _play(
        self, step: Step, body: dict[str, Any], stream: StreamHandler | None
    ) -> ModelResponse:
        if isinstance(step, Fail):
            await asyncio.sleep(step.delay)
            headers = {key.lower(): value for key, value in step.headers.items()}
            error_body = step.body if step.body is not None else {"message": step.message}
            raise classify_http(
                step.status, error_body, headers, provider=self.provider, model=self.model
            )
        if isinstance(step, Malformed):
            raise self._error(f"not a valid response: {step.raw[:80]}", ErrorKind.INVALID_RESPONSE)
        if isinstance(step, Drop):
            emitted = await self._emit(step.reply, stream, limit=step.after_chunks)
            raise self._error(
                "the stream ended early" if step.clean else "the connection dropped mid-stream",
                ErrorKind.CONNECTION,
                output_started=emitted > 0,
            )
        if isinstance(step, Endless):
            while True:
                if stream is not None:
                    stream.text(step.text)
                await asyncio.sleep(step.interval)
        if isinstance(step, Stall):
            await self._emit(step.reply, stream, limit=step.after_chunks)
            await asyncio.sleep(step.seconds)
            await self._emit(step.reply, stream, skip=step.after_chunks)
            return self._response(step.reply, body)
        await self._emit(step, stream)
        return self._response(step, body)

    async def _emit(
        self,
        reply: Reply,
        stream: StreamHandler | None,
        *,
        limit: int | None = None,
        skip: int = 0,
    ) -> int:
        """Stream the reply's deltas (optionally only a slice); how many were sent."""
        if skip == 0:
            await asyncio.sleep(reply.delay)
        if stream is None:
            return 0
        events = _events(reply)[skip:limit]
        for number, (method, arguments) in enumerate(events):
            if number and reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)
            getattr(stream, method)(*arguments)
        return len(events)

    def _response(self, reply: Reply, body: dict[str, Any]) -> ModelResponse:
        visible, reasoning = _split(reply.text or "")
        calls = [
            ToolCall(id=scripted.id or "", name=scripted.name, arguments=arguments_text(scripted))
            for scripted in reply.tool_calls
        ]
        reason = "refusal" if reply.refusal else finish_reason(reply)
        return ModelResponse(
            text=visible or None,
            tool_calls=calls,
            reasoning=((reply.reasoning or "") + reasoning) or None,
            finish_reason=reason,
            refusal=reply.refusal,
            usage=Usage(**usage_buckets(reply, body)),
            model=self.model,
        )

    def _error(
        self, message: str, kind: ErrorKind, *, status: int | None = None, **extra: Any
    ) -> ProviderError:
        return ProviderError(
            message, kind=kind, status=status, provider=self.provider, model=self.model, **extra
        )


def _split(text: str) -> tuple[str, str]:
    """Inline <think> reasoning split off, as the Chat Completions adapter does it."""
    visible, reasoning = strip_think(text)
    return (visible.lstrip() if reasoning else visible), reasoning


def _events(reply: Reply) -> list[tuple[str, tuple[Any, ...]]]:
    """The reply's deltas in stream order, as (StreamHandler method, arguments)."""
    size = reply.chunk_size
    visible, inline = _split(reply.text or "")
    events: list[tuple[str, tuple[Any, ...]]] = []
    events += [("reasoning", (piece,)) for piece in pieces((reply.reasoning or "") + inline, size)]
    events += [("text", (piece,)) for piece in pieces(visible, size)]
    for index, scripted in enumerate(reply.tool_calls):
        events.append(("tool_call", (index, scripted.id or "", scripted.name)))
        events += [
            ("tool_arguments", (index, piece)) for piece in pieces(arguments_text(scripted), size)
        ]
    return events
