"""The Anthropic Messages wire format for the scripted provider.

Validation is as strict as the real ``/v1/messages``: a history the real API would reject with a
400 is rejected here too, with the same kind of message, so adapter bugs surface in tests rather
than in production. Thinking signatures are tracked: only signatures this server issued replay.
Prompt caching is simulated (when a reply does not script its usage) so that cache markers have
a visible effect: a prefix that ended at a marker in an earlier request is read from the "cache".
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

from talaria.testing.script import Reply, ScriptedCall
from talaria.testing.wire_base import (
    arguments_text,
    estimate_tokens,
    finish_reason,
    pieces,
    sse,
    usage_buckets,
)

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
TOOL_USE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
MAX_CACHE_MARKERS = 4

_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "refusal": "refusal",
    "content_filter": "refusal",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_TOOL_KEYS = {"type", "name", "description", "input_schema", "cache_control"}
_BLOCK_ROLES = {
    "text": ("user", "assistant"),
    "image": ("user",),
    "document": ("user",),
    "tool_use": ("assistant",),
    "tool_result": ("user",),
    "thinking": ("assistant",),
    "redacted_thinking": ("assistant",),
}


class AnthropicWire:
    """``WireFormat`` for ``POST /v1/messages``; one instance remembers issued signatures."""

    api_mode = "anthropic_messages"
    path = "/v1/messages"

    def __init__(self) -> None:
        self._signatures: set[str] = set()
        self._cached_prefixes: set[str] = set()
        self._ids = itertools.count(1)

    # ----------------------------------------------------------------- validation

    def validate(self, body: dict[str, Any]) -> list[str]:
        errors = _check_top_level(body)
        if errors:
            return errors
        errors += _check_system(body.get("system"))
        errors += _check_tools(body.get("tools"), body.get("tool_choice"))
        errors += _check_messages(body["messages"], has_tools=bool(body.get("tools")))
        errors += self._check_signatures(body["messages"])
        markers = sum(1 for block in _all_blocks(body) if "cache_control" in block)
        if markers > MAX_CACHE_MARKERS:
            errors.append(
                f"A maximum of {MAX_CACHE_MARKERS} blocks with cache_control may be provided. "
                f"Found {markers}."
            )
        return errors

    def _check_signatures(self, messages: list[Any]) -> list[str]:
        errors = []
        for i, message in enumerate(messages):
            for j, block in enumerate(_blocks(message)):
                if (
                    block.get("type") == "thinking"
                    and block.get("signature") not in self._signatures
                ):
                    errors.append(f"messages.{i}.content.{j}: Invalid signature in thinking block")
        return errors

    # ------------------------------------------------------------------- rendering

    def render(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        message = self._message_head(body, self._usage(reply, body))
        message["content"] = [block for block, _ in self._content(reply)]
        message["stop_reason"] = _stop_reason(reply)
        return message

    def render_stream(self, reply: Reply, body: dict[str, Any]) -> list[bytes]:
        usage = self._usage(reply, body)
        head = self._message_head(body, {**usage, "output_tokens": 1})
        frames = [sse({"type": "message_start", "message": head}, "message_start")]
        frames.append(sse({"type": "ping"}, "ping"))
        for index, (block, deltas) in enumerate(self._content(reply, stream=True)):
            start = {"type": "content_block_start", "index": index, "content_block": block}
            frames.append(sse(start, "content_block_start"))
            for delta in deltas:
                event = {"type": "content_block_delta", "index": index, "delta": delta}
                frames.append(sse(event, "content_block_delta"))
            stop = {"type": "content_block_stop", "index": index}
            frames.append(sse(stop, "content_block_stop"))
        delta = {"stop_reason": _stop_reason(reply), "stop_sequence": None}
        end = {"type": "message_delta", "delta": delta, "usage": usage}
        frames.append(sse(end, "message_delta"))
        frames.append(sse({"type": "message_stop"}, "message_stop"))
        return frames

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def _message_head(self, body: dict[str, Any], usage: dict[str, int]) -> dict[str, Any]:
        return {
            "id": f"msg_{next(self._ids):06d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", ""),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }

    def _content(
        self, reply: Reply, *, stream: bool = False
    ) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
        """(block, deltas) pairs; a streamed block starts empty and its deltas fill it."""
        size = reply.chunk_size
        if reply.reasoning:
            signature = self._issue_signature(reply.reasoning)
            if stream:
                deltas = [
                    {"type": "thinking_delta", "thinking": p} for p in pieces(reply.reasoning, size)
                ]
                deltas.append({"type": "signature_delta", "signature": signature})
                yield {"type": "thinking", "thinking": "", "signature": ""}, deltas
            else:
                yield {"type": "thinking", "thinking": reply.reasoning, "signature": signature}, []
        text = reply.refusal or reply.text
        if text:
            deltas = [{"type": "text_delta", "text": p} for p in pieces(text, size)]
            yield {"type": "text", "text": "" if stream else text}, deltas if stream else []
        for scripted in reply.tool_calls:
            call_id = scripted.id or f"toolu_{next(self._ids):06d}"
            block = {"type": "tool_use", "id": call_id, "name": scripted.name}
            if stream:
                raw = arguments_text(scripted)
                deltas = [
                    {"type": "input_json_delta", "partial_json": p} for p in pieces(raw, size)
                ]
                yield {**block, "input": {}}, deltas
            else:
                yield {**block, "input": _input_object(scripted)}, []

    def _issue_signature(self, thinking: str) -> str:
        seed = f"{len(self._signatures)}:{thinking}".encode()
        signature = base64.b64encode(hashlib.sha256(seed).digest() * 2).decode()
        self._signatures.add(signature)
        return signature

    def _usage(self, reply: Reply, body: dict[str, Any]) -> dict[str, int]:
        """Anthropic's usage shape (already disjoint buckets), caching simulated when unscripted."""
        buckets = usage_buckets(reply, body)
        if reply.usage is None:
            read, write, total = self._simulate_cache(body)
            buckets.update(cache_read_tokens=read, cache_write_tokens=write)
            buckets["input_tokens"] = max(total - read - write, 1)
        return {
            "input_tokens": buckets["input_tokens"],
            "output_tokens": buckets["output_tokens"],
            "cache_creation_input_tokens": buckets["cache_write_tokens"],
            "cache_read_input_tokens": buckets["cache_read_tokens"],
        }

    def _simulate_cache(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """(read, written, total) tokens: the longest prefix seen at a marker before is read,
        the rest up to the last marker is written. Markers are excluded from the prefix hash,
        as a moved breakpoint does not change the cached content."""
        digest = hashlib.sha256()
        size = read = written = 0
        marked: list[str] = []
        for block in _all_blocks(body):
            content = {k: v for k, v in block.items() if k != "cache_control"}
            text = json.dumps(content, sort_keys=True, ensure_ascii=False)
            digest.update(text.encode())
            size += estimate_tokens(text)
            key = digest.hexdigest()
            if key in self._cached_prefixes:
                read = size
            if "cache_control" in block:
                marked.append(key)
                written = size
        self._cached_prefixes.update(marked)
        return read, max(written - read, 0), size


WIRE = AnthropicWire()


# --------------------------------------------------------------------- helpers


def _stop_reason(reply: Reply) -> str:
    if reply.refusal:
        return "refusal"
    return _STOP_REASONS.get(finish_reason(reply), "end_turn")


def _input_object(scripted: ScriptedCall) -> dict[str, Any]:
    """The real API always returns an object; truncated raw text becomes ``{}``."""
    if isinstance(scripted.arguments, dict):
        return scripted.arguments
    try:
        parsed = json.loads(scripted.arguments)
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _blocks(message: Any) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _all_blocks(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every block in prompt order (tools, system, messages; tool_result contents included);
    string content appears as the text block it stands for."""
    yield from (t for t in body.get("tools") or [] if isinstance(t, dict))
    system = body.get("system")
    if isinstance(system, str):
        yield {"type": "text", "text": system}
    elif isinstance(system, list):
        yield from (b for b in system if isinstance(b, dict))
    for message in body.get("messages") or []:
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            yield {"type": "text", "text": message["content"]}
        for block in _blocks(message):
            yield block
            if block.get("type") == "tool_result":
                yield from _blocks(block)


def _check_top_level(body: dict[str, Any]) -> list[str]:
    errors = []
    if not isinstance(body.get("model"), str) or not body["model"]:
        errors.append("model: Field required")
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        errors.append("max_tokens: Field required")
    elif not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        errors.append("max_tokens: Input should be greater than or equal to 1")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        errors.append("messages: at least one message is required")
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            errors.append(
                "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
            )
        elif isinstance(max_tokens, int) and budget >= max_tokens:
            errors.append("`max_tokens` must be greater than `thinking.budget_tokens`")
    return errors


def _check_system(system: Any) -> list[str]:
    if system is None or isinstance(system, str):
        return []
    if not isinstance(system, list):
        return ["system: Input should be a valid string or list of text blocks"]
    errors = []
    for j, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            errors.append(f"system.{j}.type: Input should be 'text'")
        else:
            errors += _check_text(block, f"system.{j}")
    return errors


def _check_tools(tools: Any, tool_choice: Any) -> list[str]:
    if tools is None:
        return [] if tool_choice is None else ["tool_choice: requires `tools` to be set"]
    if not isinstance(tools, list):
        return ["tools: Input should be a valid list"]
    errors = []
    names: list[str] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            errors.append(f"tools.{i}: Input should be a valid dictionary")
            continue
        errors += [
            f"tools.{i}.custom.{k}: Extra inputs are not permitted"
            for k in tool.keys() - _TOOL_KEYS
        ]
        name = tool.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            errors.append(
                f"tools.{i}.custom.name: String should match pattern '{TOOL_NAME.pattern}'"
            )
        names.append(str(name))
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            errors.append(f"tools.{i}.custom.input_schema: Input should be an object schema")
        if "cache_control" in tool:
            errors += _check_cache_control(tool["cache_control"], f"tools.{i}")
    if len(set(names)) != len(names):
        errors.append("tools: Tool names must be unique.")
    if tool_choice is not None:
        kind = tool_choice.get("type") if isinstance(tool_choice, dict) else None
        if kind not in ("auto", "any", "tool", "none"):
            errors.append("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
        elif kind == "tool" and tool_choice.get("name") not in names:
            errors.append("tool_choice.name: Tool not found in `tools`")
    return errors


def _check_messages(messages: list[Any], *, has_tools: bool) -> list[str]:
    errors: list[str] = []
    previous_role = None
    uses_tools = False
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "system":
            errors.append(
                f'messages.{i}.role: Unexpected role "system". The Messages API accepts a '
                'top-level `system` parameter, not "system" as an input message role.'
            )
            continue
        if role not in ("user", "assistant"):
            errors.append(f"messages.{i}.role: Input should be 'user' or 'assistant'")
            continue
        if i == 0 and role != "user":
            errors.append('messages: first message must use the "user" role')
        if role == previous_role:
            errors.append(
                f'messages: roles must alternate between "user" and "assistant", '
                f'but found multiple "{role}" roles in a row'
            )
        previous_role = role
        final_assistant = role == "assistant" and i == len(messages) - 1
        errors += _check_content(message.get("content"), role, f"messages.{i}", final_assistant)
        uses_tools = uses_tools or any(
            b.get("type") in ("tool_use", "tool_result") for b in _blocks(message)
        )
    if uses_tools and not has_tools:
        errors.append(
            "Requests which include `tool_use` or `tool_result` blocks must define tools."
        )
    return errors + _check_tool_pairing(messages)


def _check_content(content: Any, role: str, where: str, final_assistant: bool) -> list[str]:
    if not isinstance(content, str | list):
        return [f"{where}.content: Input should be a valid string or list of blocks"]
    if not content and not final_assistant:
        return [
            f"{where}: all messages must have non-empty content except for the optional "
            "final assistant message"
        ]
    blocks = content if isinstance(content, list) else []
    return [e for j, b in enumerate(blocks) for e in _check_block(b, role, f"{where}.content.{j}")]


def _check_block(block: Any, role: str, where: str) -> list[str]:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind not in _BLOCK_ROLES:
        return [
            f"{where}.type: Input tag '{kind}' found using 'type' does not match any of the "
            "expected tags"
        ]
    if role not in _BLOCK_ROLES[kind]:
        return [f"{where}: `{kind}` blocks are not permitted in `{role}` messages"]
    errors = _check_cache_control(block["cache_control"], where) if "cache_control" in block else []
    if kind == "text":
        errors += _check_text(block, where)
    elif kind == "tool_use":
        if not isinstance(block.get("id"), str) or not TOOL_USE_ID.match(block["id"]):
            errors.append(
                f"{where}.tool_use.id: String should match pattern '{TOOL_USE_ID.pattern}'"
            )
        if not isinstance(block.get("name"), str) or not isinstance(block.get("input"), dict):
            errors.append(f"{where}.tool_use: `name` (string) and `input` (object) are required")
    elif kind == "tool_result":
        errors += _check_tool_result(block, where)
    elif kind == "thinking":
        if not isinstance(block.get("thinking"), str) or not isinstance(
            block.get("signature"), str
        ):
            errors.append(f"{where}.thinking: `thinking` and `signature` are required")
        if "cache_control" in block:
            errors.append(f"{where}.thinking.cache_control: Extra inputs are not permitted")
    elif kind == "redacted_thinking" and not isinstance(block.get("data"), str):
        errors.append(f"{where}.redacted_thinking.data: Field required")
    elif kind == "image":
        source = block.get("source")
        if not isinstance(source, dict) or source.get("type") not in ("base64", "url"):
            errors.append(f"{where}.image.source: Input should be a base64 or url source")
    return errors


def _check_text(block: dict[str, Any], where: str) -> list[str]:
    text = block.get("text")
    if not isinstance(text, str):
        return [f"{where}.text: Field required"]
    return [] if text else [f"{where}: text content blocks must be non-empty"]


def _check_tool_result(block: dict[str, Any], where: str) -> list[str]:
    errors = []
    if not isinstance(block.get("tool_use_id"), str):
        errors.append(f"{where}.tool_result.tool_use_id: Field required")
    if "is_error" in block and not isinstance(block["is_error"], bool):
        errors.append(f"{where}.tool_result.is_error: Input should be a valid boolean")
    content = block.get("content")
    if isinstance(content, list):
        for k, inner in enumerate(content):
            kind = inner.get("type") if isinstance(inner, dict) else None
            if kind not in ("text", "image"):
                errors.append(
                    f"{where}.tool_result.content.{k}.type: Input should be 'text' or 'image'"
                )
            else:
                errors += _check_block(inner, "user", f"{where}.tool_result.content.{k}")
    elif content is not None and not isinstance(content, str):
        errors.append(f"{where}.tool_result.content: Input should be a string or list of blocks")
    return errors


def _check_cache_control(marker: Any, where: str) -> list[str]:
    ok = isinstance(marker, dict) and marker.get("type") == "ephemeral"
    ok = ok and set(marker) <= {"type", "ttl"} and marker.get("ttl", "5m") in ("5m", "1h")
    return [] if ok else [f"{where}.cache_control: Input should be {{'type': 'ephemeral'}}"]


def _check_tool_pairing(messages: list[Any]) -> list[str]:
    """Each tool_use is answered in the next (user) message, results first, no strays."""
    errors = []
    seen: set[str] = set()
    pending: list[Any] = []
    for i, message in enumerate(messages):
        blocks = _blocks(message)
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        stray = [r for r in results if r not in pending]
        if stray:
            errors.append(
                f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{', '.join(map(str, stray))}. Each `tool_result` block must have a "
                "corresponding `tool_use` block in the previous message."
            )
        missing = [p for p in pending if p not in results]
        if missing:
            errors.append(
                f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message."
            )
        kinds = [b.get("type") for b in blocks]
        if results and kinds[: len(results)] != ["tool_result"] * len(results):
            errors.append(
                f"messages.{i}.content: `tool_result` blocks must come first in the message, "
                "before any other content"
            )
        pending = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        duplicates = seen.intersection(pending)
        if duplicates or len(set(pending)) != len(pending):
            errors.append(f"messages.{i}.content: `tool_use` ids must be unique")
        seen.update(pending)
    if pending:
        errors.append(
            f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` "
            f"blocks immediately after: {', '.join(pending)}. Each `tool_use` block must have "
            "a corresponding `tool_result` block in the next message."
        )
    return errors
