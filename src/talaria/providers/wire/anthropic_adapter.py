"""Canonical (OpenAI-style) history <-> Anthropic Messages shapes, as pure functions.

The Messages API is stricter than the canonical format: the system prompt is a top-level field,
roles alternate, tool results travel as blocks of a user message (first in it), empty text is
rejected, and thinking blocks replay only with the signature the same endpoint issued. Every
rule lives here so that the client only sends and parses; nothing here does I/O.
"""

from __future__ import annotations

import json
from typing import Any

from talaria.core import Message, ModelRequest, ModelResponse, ToolCall, Usage, tool_calls_of
from talaria.providers.cache_markers import apply_cache_markers
from talaria.providers.profiles import ModelProfile, profile_for

API_MODE = "anthropic_messages"
FALLBACK_OUTPUT_LIMIT = 8192
"""Every request needs an explicit max_tokens; this one when neither config nor profile has."""

FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "refusal",
}
THINKING_TYPES = ("thinking", "redacted_thinking")

Block = dict[str, Any]


def replay_source(base_url: str) -> str:
    """The tag that decides whether stored thinking blocks may be replayed to an endpoint."""
    return f"{API_MODE}|{base_url.rstrip('/')}"


def convert_tools(tools: list[dict[str, Any]]) -> list[Block]:
    """OpenAI function schemas -> ``{name, description, input_schema}``, order kept."""
    converted = []
    for tool in tools:
        function = tool.get("function", tool)
        schema = function.get("parameters") or {"type": "object", "properties": {}}
        entry: Block = {"name": function["name"]}
        if function.get("description"):
            entry["description"] = function["description"]
        entry["input_schema"] = schema
        converted.append(entry)
    return converted


def convert_messages(
    messages: list[Message], *, source: str
) -> tuple[list[Block], list[dict[str, Any]]]:
    """(system blocks, Anthropic messages) from canonical messages.

    Tool messages become tool_result blocks of a user message; consecutive same-role messages
    merge (tool results first in a user message, thinking first in an assistant message);
    messages left without content are dropped; empty text is never emitted.
    """
    system: list[Block] = []
    merged: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            system.extend(_text_blocks(message.get("content")))
            continue
        if role == "assistant":
            blocks = _assistant_blocks(message, source)
        elif role == "tool":
            blocks = [_tool_result(message)]
        else:
            blocks = _user_blocks(message.get("content"))
        wire_role = "assistant" if role == "assistant" else "user"
        if not any(block.get("type") not in THINKING_TYPES for block in blocks):
            continue
        if merged and merged[-1]["role"] == wire_role:
            merged[-1]["content"].extend(blocks)
        else:
            merged.append({"role": wire_role, "content": blocks})
    for turn in merged:
        first = ("tool_result",) if turn["role"] == "user" else THINKING_TYPES
        turn["content"].sort(key=lambda block: block.get("type") not in first)
    return system, merged


def build_body(
    request: ModelRequest,
    *,
    model: str,
    source: str,
    profile: ModelProfile | None = None,
    max_tokens_default: int | None = None,
    thinking: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The complete ``/v1/messages`` JSON body for one request (always with max_tokens)."""
    profile = profile or profile_for(provider="anthropic", model=model, api_mode=API_MODE)
    system, messages = convert_messages(request.messages, source=source)
    tools = convert_tools(request.tools)
    if request.cache_ttl and profile.cache_markers:
        system, messages, tools = apply_cache_markers(
            system, messages, tools, ttl=request.cache_ttl
        )
    default = max_tokens_default or profile.output_limit_default or FALLBACK_OUTPUT_LIMIT
    max_tokens = request.max_tokens or default
    budget = (thinking or {}).get("budget_tokens")
    if isinstance(budget, int) and max_tokens <= budget:
        max_tokens = budget + default
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    if system:
        body["system"] = system
    body.update(_tool_fields(tools, request.tool_choice, profile))
    body["messages"] = messages
    if thinking:
        body["thinking"] = thinking
    elif request.temperature is not None and profile.supports_temperature:
        body["temperature"] = request.temperature
    if request.stream:
        body["stream"] = True
    if request.extra_body:
        body.update(request.extra_body)
    return body


def _tool_fields(tools: list[Block], tool_choice: str, profile: ModelProfile) -> dict[str, Any]:
    """``tools`` and a ``tool_choice`` object, sent only to say "none" or "one at a time".
    The tools stay even without ``tool_choice``: a history with tool blocks needs them."""
    if not tools:
        return {}
    fields: dict[str, Any] = {"tools": tools}
    if not profile.supports_tool_choice:
        return fields
    if tool_choice == "none":
        fields["tool_choice"] = {"type": "none"}
    elif profile.parallel_tool_calls is False:
        fields["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
    return fields


def parse_message(
    content: list[Block],
    stop_reason: str | None,
    usage: dict[str, Any],
    *,
    source: str,
    model: str | None = None,
    response_id: str | None = None,
) -> ModelResponse:
    """A ModelResponse from Anthropic content blocks (the streaming path assembles the same)."""
    texts = [b.get("text") or "" for b in content if b.get("type") == "text"]
    thinking = [b for b in content if b.get("type") in THINKING_TYPES]
    reasoning = "".join(b.get("thinking") or "" for b in thinking)
    calls = [
        ToolCall(b["id"], b["name"], _arguments_text(b.get("input")))
        for b in content
        if b.get("type") == "tool_use"
    ]
    text = "".join(texts) or None
    finish = FINISH_REASONS.get(stop_reason or "end_turn", "stop")
    return ModelResponse(
        text=text,
        tool_calls=calls,
        reasoning=reasoning or None,
        reasoning_details={"source": source, "items": thinking} if thinking else None,
        finish_reason=finish,
        refusal=(text or "the model refused to answer") if finish == "refusal" else None,
        usage=parse_usage(usage),
        model=model,
        response_id=response_id,
    )


def parse_usage(usage: dict[str, Any]) -> Usage:
    """Anthropic already reports disjoint buckets: input excludes cache reads and writes."""
    return Usage(
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read_tokens=int(usage.get("cache_read_input_tokens") or 0),
        cache_write_tokens=int(usage.get("cache_creation_input_tokens") or 0),
    )


def _arguments_text(value: Any) -> str:
    """Tool input as canonical JSON text; the streaming path may hand over raw (cut) text."""
    if isinstance(value, str):
        return value
    return json.dumps(value if value is not None else {}, ensure_ascii=False)


def _text_blocks(content: Any) -> list[Block]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    kinds = ("text", "input_text", "output_text")
    return [
        {"type": "text", "text": part["text"]}
        for part in content or []
        if isinstance(part, dict) and part.get("type") in kinds and part.get("text")
    ]


def _user_blocks(content: Any) -> list[Block]:
    if not isinstance(content, list):
        return _text_blocks(content)
    blocks: list[Block] = []
    for part in content:
        image = _image_block(part) if isinstance(part, dict) else None
        blocks.extend([image] if image else _text_blocks([part]))
    return blocks


def _image_block(part: dict[str, Any]) -> Block | None:
    if part.get("type") == "image" and isinstance(part.get("source"), dict):
        return {"type": "image", "source": part["source"]}
    if part.get("type") != "image_url":
        return None
    ref = part.get("image_url")
    url = ref.get("url") if isinstance(ref, dict) else ref
    if not isinstance(url, str) or not url:
        return None
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    return {"type": "image", "source": {"type": "url", "url": url}}


def _tool_result(message: Message) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": message.get("tool_call_id") or ""}
    content = message.get("content")
    inner = _user_blocks(content) if isinstance(content, list) else _text_blocks(content)
    if len(inner) == 1 and inner[0]["type"] == "text":
        block["content"] = inner[0]["text"]
    elif inner:
        block["content"] = inner
    return block


def _assistant_blocks(message: Message, source: str) -> list[Block]:
    details = message.get("reasoning_details")
    blocks: list[Block] = []
    if isinstance(details, dict) and details.get("source") == source:
        items = details.get("items") or []
        blocks.extend(
            dict(item)
            for item in items
            if isinstance(item, dict) and item.get("type") in THINKING_TYPES
        )
    blocks.extend(_text_blocks(message.get("content")))
    for call in tool_calls_of(message):
        function = call.get("function") or {}
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id") or "",
                "name": function.get("name") or "",
                "input": _input_object(function.get("arguments")),
            }
        )
    return blocks


def _input_object(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}
