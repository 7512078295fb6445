"""Prompt-cache breakpoints: the "system and last 3" strategy.

Anthropic caches the prompt prefix up to each block carrying ``cache_control`` and accepts at
most 4 such blocks per request. One marker on the system prompt keeps the stable prefix (tools
and system) cached for the whole session; one on each of the last 3 messages lets the growing
conversation be read back from the cache on the next step instead of being paid for again.

Everything here is pure: new lists are returned and the inputs are never mutated (a marked
block or message is a copy; unmarked ones are shared, which keeps a pass O(markers) rather than
O(history)), so the stored history and the byte-stable prefix are never touched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MAX_MARKERS = 4
RECENT_MESSAGES = 3

Block = dict[str, Any]


def cache_control(ttl: str = "5m") -> dict[str, str]:
    """The marker for a TTL: "5m" is the API default, "1h" must be spelled out."""
    if ttl == "5m":
        return {"type": "ephemeral"}
    if ttl == "1h":
        return {"type": "ephemeral", "ttl": "1h"}
    raise ValueError(f"unsupported prompt-cache ttl {ttl!r} (expected '5m' or '1h')")


def apply_cache_markers(
    system_blocks: list[Block],
    messages: list[dict[str, Any]],
    tools: list[Block],
    *,
    ttl: str = "5m",
) -> tuple[list[Block], list[dict[str, Any]], list[Block]]:
    """Anthropic-format (system blocks, messages, tools) with breakpoints added.

    Markers already present count towards the limit of 4 and are kept. The system marker comes
    first (it protects the longest-lived prefix); the remaining budget goes to the newest of the
    last 3 messages. Thinking blocks cannot carry a marker, so a message's last other block does.
    """
    marker = cache_control(ttl)
    system_blocks, messages, tools = list(system_blocks), list(messages), list(tools)
    budget = MAX_MARKERS - count_markers(system_blocks, messages, tools)
    if budget > 0 and system_blocks and "cache_control" not in system_blocks[-1]:
        system_blocks[-1] = {**system_blocks[-1], "cache_control": dict(marker)}
        budget -= 1
    recent = range(max(len(messages) - RECENT_MESSAGES, 0), len(messages))
    for position in reversed(recent):
        if budget <= 0:
            break
        marked = _marked_message(messages[position], marker)
        if marked is not None:
            messages[position] = marked
            budget -= 1
    return system_blocks, messages, tools


def apply_openai_format_cache_markers(
    messages: Sequence[Mapping[str, Any]], ttl: str = "5m"
) -> list[Mapping[str, Any]]:
    """The same strategy on OpenAI chat messages (Claude through OpenRouter and similar).

    String content becomes a one-part list so the marker can sit on the text part; a message
    with no content (an assistant turn that only calls tools) is skipped, since chat endpoints
    take markers only on content parts.
    """
    marker = cache_control(ttl)
    messages = list(messages)
    budget = MAX_MARKERS - sum(_openai_markers(m) for m in messages)
    systems = [i for i, m in enumerate(messages) if m.get("role") == "system"]
    others = [i for i, m in enumerate(messages) if m.get("role") != "system"]
    for position in systems[-1:] + others[: -RECENT_MESSAGES - 1 : -1]:
        if budget <= 0:
            break
        message = messages[position]
        if _openai_markers(message):
            continue
        content = message.get("content")
        if isinstance(content, str) and content:
            parts = [{"type": "text", "text": content, "cache_control": dict(marker)}]
            messages[position] = {**message, "content": parts}
        elif isinstance(content, list) and content and isinstance(content[-1], dict):
            parts = [*content[:-1], {**content[-1], "cache_control": dict(marker)}]
            messages[position] = {**message, "content": parts}
        else:
            continue
        budget -= 1
    return messages


def count_markers(
    system_blocks: list[Block], messages: list[dict[str, Any]], tools: list[Block]
) -> int:
    """How many blocks carry ``cache_control`` (what the API limits to 4)."""
    blocks: list[Any] = [*tools, *system_blocks]
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            blocks.extend(content)
            for block in content:
                inner = block.get("content") if isinstance(block, dict) else None
                if isinstance(inner, list):
                    blocks.extend(inner)
    return sum(1 for block in blocks if isinstance(block, dict) and "cache_control" in block)


def _marked_message(message: dict[str, Any], marker: dict[str, str]) -> dict[str, Any] | None:
    """A copy of ``message`` with a marker on its last markable block; None when it has none
    (only thinking, empty) or that block is already marked. Unchanged blocks are shared."""
    content = message.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        return None
    for index in range(len(content) - 1, -1, -1):
        block = content[index]
        if isinstance(block, dict) and block.get("type") not in ("thinking", "redacted_thinking"):
            if "cache_control" in block:
                return None
            blocks = list(content)
            blocks[index] = {**block, "cache_control": dict(marker)}
            return {**message, "content": blocks}
    return None


def _openai_markers(message: Mapping[str, Any]) -> int:
    content = message.get("content")
    parts = content if isinstance(content, list) else []
    own = 1 if "cache_control" in message else 0
    return own + sum(1 for p in parts if isinstance(p, dict) and "cache_control" in p)
