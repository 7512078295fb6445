"""Server-sent events, written by hand: a frame format and a streaming response."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import StreamingResponse

KEEPALIVE_S = 15.0
PING = b": ping\n\n"


def frame(data: Any, event: str | None = None, event_id: int | None = None) -> bytes:
    """One SSE frame; `data` is JSON-encoded unless it is already a string."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if event is not None:
        lines.append(f"event: {event}")
    lines.extend(f"data: {line}" for line in text.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


def sse_response(
    body: AsyncIterator[bytes], headers: dict[str, str] | None = None
) -> StreamingResponse:
    """A stream proxies must not buffer. A client that hangs up only stops its own stream:
    the turn behind it runs on as its own task."""
    return StreamingResponse(
        body,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **(headers or {})},
    )
