"""Server-sent events, read from the bytes of a streamed answer.

What the three wire APIs use of the format: ``data:`` lines (several make one multi-line
event), ``event:`` names (Anthropic), ``:`` comments (keep-alives), blank lines ending an
event, any of the three line endings, and OpenAI's ``[DONE]`` sentinel.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from talaria import fastjson


@dataclass(frozen=True, slots=True)
class Event:
    name: str
    data: str


class StreamErrorEvent(Exception):
    """An ``{"error": ...}`` event inside a 200 stream; `classify_exception` reads `body`."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(str(body.get("error")))
        self.body = body


class BadEventError(ValueError):
    """An event whose data is not JSON (classified as an invalid response)."""


async def events(chunks: AsyncIterator[bytes]) -> AsyncIterator[Event]:
    """The events in a byte stream; an event cut off by the end of the stream still counts."""
    pending = b""
    name = ""
    data: list[str] = []
    async for chunk in chunks:
        lines = (pending + chunk).splitlines(keepends=True)
        pending = lines.pop() if lines and _unfinished(lines[-1]) else b""
        for line in lines:
            text = line.rstrip(b"\r\n").decode("utf-8", errors="replace")
            if text:
                name = _field(text, name, data)
            elif data:
                yield Event(name, "\n".join(data))
                name, data = "", []
            else:
                name = ""
    if pending:
        name = _field(pending.rstrip(b"\r").decode("utf-8", errors="replace"), name, data)
    if data:
        yield Event(name, "\n".join(data))


def _unfinished(line: bytes) -> bool:
    """A line without its ending yet; a lone CR may be the first half of CRLF."""
    return not line.endswith((b"\n", b"\r")) or line.endswith(b"\r")


def _field(line: str, name: str, data: list[str]) -> str:
    """Apply one ``field: value`` line; the event name it leaves."""
    if line.startswith(":"):
        return name
    field, _, value = line.partition(":")
    value = value[1:] if value.startswith(" ") else value
    if field == "data":
        data.append(value)
    elif field == "event":
        return value
    return name


async def json_events(
    chunks: AsyncIterator[bytes], on_done: Callable[[], None] | None = None
) -> AsyncGenerator[dict[str, Any], None]:
    """Each event's data as a dict, up to ``[DONE]`` (`on_done` is called when it comes: a
    stream that stops without it may have been cut); ``{"error": ...}`` events raise."""
    async for event in events(chunks):
        if event.data == "[DONE]":
            if on_done is not None:
                on_done()
            return
        try:
            data = fastjson.loads(event.data)
        except ValueError as exc:
            raise BadEventError(f"bad stream event: {event.data[:200]}") from exc
        if not isinstance(data, dict):
            raise BadEventError(f"bad stream event: {event.data[:200]}")
        if data.get("error"):
            raise StreamErrorEvent(data)
        yield data
