"""Canonical messages in the GenAI conventions' message shape (recorded only on request).

The conventions describe a message as a role plus typed parts (`text`, `tool_call`,
`tool_call_response`); the system prompt goes apart as `gen_ai.system_instructions`. Values are
recorded as JSON strings, which every OTLP backend stores.
"""

from __future__ import annotations

import json
from typing import Any

from talaria.core import Message, ModelResponse, tool_calls_of


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text")) for part in content if isinstance(part, dict) and "text" in part
        )
    return ""


def _parts(message: Message) -> list[dict[str, Any]]:
    if message.get("role") == "tool":
        response = _text_of(message.get("content"))
        return [
            {"type": "tool_call_response", "id": message.get("tool_call_id"), "response": response}
        ]
    parts: list[dict[str, Any]] = []
    text = _text_of(message.get("content"))
    if text:
        parts.append({"type": "text", "content": text})
    for call in tool_calls_of(message):
        function = call.get("function") or {}
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": function.get("name"),
                "arguments": function.get("arguments"),
            }
        )
    return parts


def input_messages(messages: list[Message]) -> tuple[str | None, str]:
    """(`gen_ai.system_instructions`, `gen_ai.input.messages`) for a request's messages."""
    system = [_text_of(m.get("content")) for m in messages if m.get("role") == "system"]
    rest = [
        {"role": m.get("role"), "parts": _parts(m)} for m in messages if m.get("role") != "system"
    ]
    instructions = dumps([{"type": "text", "content": text} for text in system]) if system else None
    return instructions, dumps(rest)


def output_messages(response: ModelResponse) -> str:
    message = {
        "role": "assistant",
        "parts": _parts(response.to_message()),
        "finish_reason": response.finish_reason,
    }
    return dumps([message])


def user_turn(text: str) -> str:
    return dumps([{"role": "user", "parts": [{"type": "text", "content": text}]}])


def final_answer(text: str | None) -> str:
    return dumps([{"role": "assistant", "parts": [{"type": "text", "content": text or ""}]}])


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
