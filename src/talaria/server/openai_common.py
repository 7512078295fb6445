"""What the two OpenAI-compatible endpoints share: the model list, the agent's answer of a
headless turn, and turning a client's message list into a talaria turn.

A client of these endpoints sends its whole conversation each time. talaria keeps the session
itself, so only the last user message is the input: with a session named (header or previous
response), earlier messages are NOT replayed into it; without one, the earlier user and
assistant messages seed the new session. Client system messages are ignored (the agent keeps
its own system prompt, which its tools rely on).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from talaria.core import Message, failure_class
from talaria.server.bodies import non_empty, text_of
from talaria.server.errors import ApiError
from talaria.server.hub import SessionHub, TurnRequest, hub_of
from talaria.server.runs import Run, RunEvent

SESSION_HEADER = "X-Talaria-Session"
STARTED = int(time.time())


def check_model(hub: SessionHub, model: Any) -> str:
    name = hub.settings.agent_name
    if model is None:
        return name
    if model != name:
        raise ApiError(
            404, f"unknown model {model!r}: this server serves {name!r}", "model_not_found"
        )
    return name


def turn_from_messages(
    items: Iterable[Any], session_id: str | None, last_user: dict[str, Any]
) -> TurnRequest:
    """The turn for a client conversation whose last user message is `last_user`."""
    text = non_empty(text_of(last_user.get("content")), "the last user message")
    if session_id is not None:
        return TurnRequest(text=text, session_id=session_id, headless=True)
    history: list[Message] = []
    for item in items:
        if not isinstance(item, dict) or item is last_user:
            continue
        content = text_of(item.get("content"))
        if item.get("role") in ("user", "assistant") and content:
            history.append({"role": item["role"], "content": content})
    return TurnRequest(text=text, headless=True, history=history or None)


async def finished(run: Run) -> tuple[RunEvent, dict[str, Any]]:
    """The run's last event and result; 409 when another process holds the session, 502
    when the agent failed (its message says why)."""
    last = await run.wait()
    result = run.result or {}
    if last.name == "run.failed":
        error = str(last.data.get("error") or "the agent failed")
        if failure_class(str(result.get("turn_exit_reason", ""))) == "session_busy":
            raise ApiError(409, error, "session_busy")
        raise ApiError(502, error)
    return last, result


def prompt_tokens(usage: dict[str, Any]) -> int:
    """All input, cached or not (the OpenAI convention; talaria's buckets are disjoint)."""
    return sum(
        int(usage.get(k) or 0) for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens")
    )


async def list_models(request: Request) -> Response:
    hub = hub_of(request)
    model = {
        "id": hub.settings.agent_name,
        "object": "model",
        "created": STARTED,
        "owned_by": "talaria",
    }
    return JSONResponse({"object": "list", "data": [model]})


ROUTES = [Route("/v1/models", list_models, methods=["GET"])]
