"""The ACP wire as JSON-RPC messages: one per line, each checked before the SDK sees it.

The SDK's own line reader skips a line that is not JSON without answering, and ends the agent
with a traceback on one that is JSON but not a message it can dispatch (`[1]`, `3`, `null`, an
`id` that is an object). `CheckedTransport` answers every such line with a JSON-RPC error
(-32700 when it is not JSON, -32600 when it is JSON but not a request, notification or
response; the error's id is the line's own when it had a usable one, else null) and hands the
SDK only the messages it can dispatch. It is the SDK's message-level `Transport`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from talaria.acp.wire import READ_LIMIT

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
DRAIN_S = 30.0
"""How long requests already read may still be answered once the editor closes its end."""
TOO_LONG = object()
"""What `_next_line` returns for a line over the reader's limit (read through and dropped)."""


def _is_id(value: Any) -> bool:
    return value is None or isinstance(value, str) or (type(value) is int)


def _problem(message: dict[str, Any]) -> str | None:
    """Why `message` is not a JSON-RPC 2.0 request, notification or response (None: it is)."""
    if message.get("jsonrpc") != "2.0":
        return "'jsonrpc' must be \"2.0\""
    if "id" in message and not _is_id(message["id"]):
        return "'id' must be a string, an integer or null"
    if "method" in message:
        if not isinstance(message["method"], str):
            return "'method' must be a string"
        if not isinstance(message.get("params"), dict | list | None):
            return "'params' must be an object or an array"
        return None
    if "id" not in message:
        return "a message needs a 'method' (a request or notification) or an 'id' (a response)"
    if ("result" in message) == ("error" in message):
        return "a response has exactly one of 'result' and 'error'"
    error = message.get("error", {})
    if not isinstance(error, dict) or type(error.get("code", 0)) is not int:
        return "'error' must be an object with an integer 'code'"
    return None


_KINDS: dict[type, str] = {
    list: "an array (batches are not supported)",
    str: "a string",
    bool: "true or false",
    type(None): "null",
}


def error_response(ident: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}


def check(line: bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the message, None) when `line` is one the SDK can dispatch, else (None, the error
    response to send back)."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        return None, error_response(
            None, PARSE_ERROR, f"Parse error: the line is not JSON ({reason})"
        )
    if not isinstance(value, dict):
        kind = (
            "an array (batches are not supported)" if isinstance(value, list) else "not an object"
        )
        return None, error_response(
            None, INVALID_REQUEST, f"Invalid request: a message must be a JSON object, got {kind}"
        )
    problem = _problem(value)
    if problem is None:
        return value, None
    ident = value.get("id") if _is_id(value.get("id")) else None
    return None, error_response(ident, INVALID_REQUEST, f"Invalid request: {problem}")


class CheckedTransport:
    """Newline-delimited JSON-RPC over asyncio streams; bad lines are answered here."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()
        self._unanswered: set[Any] = set()
        self._all_answered = asyncio.Event()
        self._all_answered.set()

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        async with self._lock:
            self._writer.write(data)
            await self._writer.drain()
        if "method" not in message and message.get("id") in self._unanswered:
            self._unanswered.discard(message["id"])
            if not self._unanswered:
                self._all_answered.set()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._next_line()
            if line is None:  # the editor closed its end: answer what it asked first
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._all_answered.wait(), DRAIN_S)
                return None
            if line is TOO_LONG:
                limit = f"{READ_LIMIT // (1024 * 1024)} MiB"
                await self.send(
                    error_response(None, PARSE_ERROR, f"Parse error: a line over {limit}")
                )
                continue
            assert isinstance(line, bytes)
            if not line.strip():
                continue
            message, error = check(line)
            if message is not None:
                if "method" in message and message.get("id") is not None:
                    self._unanswered.add(message["id"])
                    self._all_answered.clear()
                return message
            if error is not None:
                await self.send(error)

    async def close(self) -> None:
        """The wire stays open (it is the process's stdout); what was written is flushed,
        unless the editor has gone already."""
        async with self._lock:
            with contextlib.suppress(ConnectionError, OSError):
                await self._writer.drain()

    async def _next_line(self) -> bytes | object | None:
        try:
            return await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            return exc.partial or None  # the last line may lack its newline
        except asyncio.LimitOverrunError:
            await self._skip_line()
            return TOO_LONG

    async def _skip_line(self) -> None:
        while True:
            try:
                await self._reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self._reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                return
