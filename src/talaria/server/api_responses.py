"""`POST /v1/responses` (the OpenAI Responses API), streaming as `responses.stream()` parses.

`previous_response_id` continues the session that answered it: a response id carries its
session id, and the session's state lists the ids it issued (so an invented id is refused).
Headless like chat completions: approvals are denied and the model is told.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from talaria.offload import run_blocking
from talaria.server.bodies import field_of, read_json
from talaria.server.errors import ApiError
from talaria.server.hub import SessionHub
from talaria.server.openai_common import (
    SESSION_HEADER,
    check_model,
    finished,
    hub_of,
    prompt_tokens,
    turn_from_messages,
)
from talaria.server.runs import TERMINAL_EVENTS, Run
from talaria.server.sse import KEEPALIVE_S, PING, frame, sse_response

RESPONSE_IDS_KEY = "openai_response_ids"
KEPT_RESPONSE_IDS = 500


def new_response_id(session_id: str) -> str:
    return f"resp_{session_id.encode().hex()}_{uuid.uuid4().hex[:12]}"


async def session_of_response(hub: SessionHub, response_id: str) -> str:
    """The session that issued `response_id`; 404 for an id this server never issued."""
    encoded = response_id.removeprefix("resp_").rpartition("_")[0]
    try:
        session_id = bytes.fromhex(encoded).decode()
    except ValueError:
        session_id = ""
    issued = (
        await run_blocking(hub.store.get_state, session_id, RESPONSE_IDS_KEY)
        if session_id
        else None
    )
    if not isinstance(issued, list) or response_id not in issued:
        raise ApiError(404, f"no response {response_id!r} (previous_response_id)")
    return session_id


async def _remember(hub: SessionHub, run: Run, response_id: str) -> None:
    def update() -> None:
        issued = hub.store.get_state(run.session_id, RESPONSE_IDS_KEY) or []
        hub.store.set_state(
            run.session_id, RESPONSE_IDS_KEY, [*issued, response_id][-KEPT_RESPONSE_IDS:]
        )

    await run_blocking(update)


def _input_items(body: dict[str, Any]) -> list[Any]:
    value = field_of(body, "input", (str, list), required=True)
    return [{"role": "user", "content": value}] if isinstance(value, str) else value


class _Response:
    """The response object as it grows, and the numbered stream events about it."""

    def __init__(self, response_id: str, model: str, previous: str | None) -> None:
        self.id = response_id
        self.model = model
        self.previous = previous
        self.created_at = int(time.time())
        self.message_id = f"msg_{uuid.uuid4().hex[:24]}"
        self.sequence = 0

    def message(self, text: str, status: str) -> dict[str, Any]:
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        return {
            "type": "message",
            "id": self.message_id,
            "status": status,
            "role": "assistant",
            "content": [part] if status == "completed" else [],
        }

    def body(
        self,
        status: str,
        text: str | None = None,
        usage: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "model": self.model,
            "status": status,
            "output": [self.message(text, "completed")] if text is not None else [],
            "previous_response_id": self.previous,
            "error": {"code": "server_error", "message": error} if error else None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "parallel_tool_calls": True,
            "temperature": None,
            "tool_choice": "auto",
            "tools": [],
            "top_p": None,
            "usage": _usage(usage) if usage is not None else None,
        }

    def event(self, kind: str, **fields: Any) -> bytes:
        self.sequence += 1
        return frame({"type": kind, "sequence_number": self.sequence, **fields}, kind)


def _usage(usage: dict[str, Any]) -> dict[str, Any]:
    prompt = prompt_tokens(usage)
    output = int(usage.get("output_tokens") or 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": int(usage.get("cache_read_tokens") or 0)},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": int(usage.get("reasoning_tokens") or 0)},
        "total_tokens": prompt + output,
    }


async def responses(request: Request) -> Response:
    hub = hub_of(request)
    body = await read_json(request)
    model = check_model(hub, body.get("model"))
    items = _input_items(body)
    users = [i for i in items if isinstance(i, dict) and i.get("role") == "user"]
    if not items or not users or items[-1] is not users[-1]:
        raise ApiError(422, "'input' must be text or end with a user message")
    previous = field_of(body, "previous_response_id", str)
    session_id = await session_of_response(hub, previous) if previous else None
    run = await hub.start_turn(turn_from_messages(items, session_id, users[-1]))
    response = _Response(new_response_id(run.session_id), model, previous)
    headers = {SESSION_HEADER: run.session_id}
    if field_of(body, "stream", bool, default=False):
        return sse_response(_stream(hub, run, response), headers)
    last, result = await finished(run)
    await _remember(hub, run, response.id)
    text = last.data.get("final_response") or ""
    return JSONResponse(
        response.body("completed", text, result.get("usage") or {}), headers=headers
    )


async def _stream(hub: SessionHub, run: Run, response: _Response) -> AsyncIterator[bytes]:
    where = {"item_id": response.message_id, "output_index": 0, "content_index": 0}
    yield response.event("response.created", response=response.body("in_progress"))
    yield response.event("response.in_progress", response=response.body("in_progress"))
    yield response.event(
        "response.output_item.added", output_index=0, item=response.message("", "in_progress")
    )
    empty_part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    yield response.event("response.content_part.added", part=empty_part, **where)
    text: list[str] = []
    async for event in run.follow(0, keepalive=KEEPALIVE_S):
        if event is None:
            yield PING
        elif event.name == "message.delta":
            text.append(event.data["text"])
            yield response.event(
                "response.output_text.delta", delta=event.data["text"], logprobs=[], **where
            )
        elif event.name == "run.failed":
            failed = response.body("failed", error=str(event.data.get("error")))
            yield response.event("response.failed", response=failed)
            return
        elif event.name in TERMINAL_EVENTS:
            final = "".join(text) or event.data.get("final_response") or ""
            if final and not text:
                yield response.event(
                    "response.output_text.delta", delta=final, logprobs=[], **where
                )
            yield response.event("response.output_text.done", text=final, logprobs=[], **where)
            part = {**empty_part, "text": final}
            yield response.event("response.content_part.done", part=part, **where)
            item = response.message(final, "completed")
            yield response.event("response.output_item.done", output_index=0, item=item)
            await _remember(hub, run, response.id)
            done = response.body("completed", final, event.data.get("usage") or {})
            yield response.event("response.completed", response=done)


ROUTES = [Route("/v1/responses", responses, methods=["POST"])]
