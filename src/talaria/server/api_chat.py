"""`POST /v1/chat/completions`, so chat front ends and the official SDKs work unchanged.

The answer is the agent's final message; streaming sends the agent's text as it is written.
The session is named by the `X-Talaria-Session` header (echoed in every response; a new one
when absent). Approvals cannot be asked here: the headless rule denies them and the model is
told why (unless `server.approvals: off`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from talaria.server.bodies import field_of, read_json
from talaria.server.errors import ApiError, error_body
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


def _usage(usage: dict[str, Any]) -> dict[str, int]:
    prompt = prompt_tokens(usage)
    completion = int(usage.get("output_tokens") or 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


class _Completion:
    """The ids and the envelope every chunk of one completion shares."""

    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        self.model = model
        self.created = int(time.time())

    def envelope(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return frame({**self.envelope("chat.completion.chunk"), "choices": [choice]})


async def chat_completions(request: Request) -> Response:
    hub = hub_of(request)
    body = await read_json(request)
    model = check_model(hub, body.get("model"))
    messages = field_of(body, "messages", list, required=True)
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not messages or not users or messages[-1] is not users[-1]:
        raise ApiError(422, "'messages' must end with a user message (the agent's input)")
    session_id = request.headers.get(SESSION_HEADER) or None
    run = await hub.start_turn(turn_from_messages(messages, session_id, users[-1]))
    headers = {SESSION_HEADER: run.session_id}
    completion = _Completion(model)
    if field_of(body, "stream", bool, default=False):
        options = field_of(body, "stream_options", dict, default={})
        stream = _stream(run, completion, bool(options.get("include_usage")))
        return sse_response(stream, headers)
    last, result = await finished(run)
    message = {"role": "assistant", "content": last.data.get("final_response") or ""}
    choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
    answer = {
        **completion.envelope("chat.completion"),
        "choices": [choice],
        "usage": _usage(result.get("usage") or {}),
    }
    return JSONResponse(answer, headers=headers)


async def _stream(run: Run, completion: _Completion, include_usage: bool) -> AsyncIterator[bytes]:
    yield completion.chunk({"role": "assistant", "content": ""})
    streamed = False
    async for event in run.follow(0, keepalive=KEEPALIVE_S):
        if event is None:
            yield PING
        elif event.name == "message.delta":
            streamed = True
            yield completion.chunk({"content": event.data["text"]})
        elif event.name == "run.failed":
            yield frame(error_body(502, str(event.data.get("error"))))
            return
        elif event.name in TERMINAL_EVENTS:
            final = event.data.get("final_response")
            if final and not streamed:
                yield completion.chunk({"content": final})
            yield completion.chunk({}, "stop")
            if include_usage:
                usage = {**completion.envelope("chat.completion.chunk"), "choices": []}
                usage["usage"] = _usage(event.data.get("usage") or {})
                yield frame(usage)
    yield b"data: [DONE]\n\n"


ROUTES = [Route("/v1/chat/completions", chat_completions, methods=["POST"])]
