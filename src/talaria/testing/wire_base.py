"""The plug-in protocol for wire formats the scripted HTTP provider speaks, and shared helpers.

Each wire module (`wire_chat`, `wire_responses`, `wire_anthropic`) exposes a module-level
``WIRE`` object implementing `WireFormat`. The server owns HTTP, timing and error injection; a
wire owns only the shapes of its API, so adding an API never touches the server.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from talaria.testing.script import Reply, ScriptedCall

USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


class WireFormat(Protocol):
    """What the server needs from one wire API."""

    api_mode: str
    """"chat_completions" | "codex_responses" | "anthropic_messages"."""
    path: str
    """"/v1/chat/completions" | "/v1/responses" | "/v1/messages"."""

    def validate(self, body: dict[str, Any]) -> list[str]:
        """Strict checks as the real provider makes them; [] when the request is valid."""
        ...

    def render(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        """The non-streaming JSON answer."""
        ...

    def render_stream(self, reply: Reply, body: dict[str, Any]) -> list[bytes]:
        """The streaming answer as complete SSE frames (the server may pause between them)."""
        ...

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The provider's own JSON error shape."""
        ...


def sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    """One complete server-sent-event frame (``event:`` line only when named)."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def estimate_tokens(text: str) -> int:
    """A plausible token count (~4 characters a token), at least 1 for non-empty text."""
    return (len(text) + 3) // 4


def prompt_tokens(body: dict[str, Any]) -> int:
    """How many tokens the scripted server counts for a request's prompt (it reports this
    in the usage and compares it with a llama.cpp-style ``n_ctx``)."""
    return estimate_tokens(json.dumps(body, ensure_ascii=False))


def arguments_text(scripted: ScriptedCall) -> str:
    """The JSON text of a scripted call's arguments; a raw string passes through untouched."""
    if isinstance(scripted.arguments, str):
        return scripted.arguments
    return json.dumps(scripted.arguments, ensure_ascii=False)


def pieces(text: str, size: int) -> list[str]:
    """Split ``text`` into stream deltas of ``size`` characters (one piece when size < 1)."""
    if size < 1 or len(text) <= size:
        return [text] if text else []
    return [text[i : i + size] for i in range(0, len(text), size)]


def finish_reason(reply: Reply) -> str:
    """The canonical finish reason: explicit, else tool_calls when calling tools, else stop."""
    if reply.finish_reason:
        return reply.finish_reason
    return "tool_calls" if reply.tool_calls else "stop"


def usage_buckets(reply: Reply, body: dict[str, Any]) -> dict[str, int]:
    """The reply's usage in talaria's disjoint buckets, estimated from the texts when not given."""
    if reply.usage is not None:
        return {key: int(reply.usage.get(key, 0)) for key in USAGE_KEYS}
    reasoning = estimate_tokens(reply.reasoning or "")
    output = estimate_tokens(reply.text or "") + reasoning
    output += sum(estimate_tokens(arguments_text(c)) + 2 for c in reply.tool_calls)
    return {
        "input_tokens": prompt_tokens(body),
        "output_tokens": output,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "reasoning_tokens": reasoning,
    }
