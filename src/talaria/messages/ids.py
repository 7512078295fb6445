"""Tool-call ids every provider accepts, unique across the history.

Models behind OpenAI-compatible endpoints produce ids Anthropic rejects (``call 1``, 80-char
ids, none at all) and local servers reuse ``call_0`` every turn. Renaming is deterministic (it
depends only on the history), so the same stored history always yields the same request bytes
and the provider's prompt cache keeps working.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Sequence
from typing import Any, cast

from talaria.core import AssistantMessage, Message, ToolMessage
from talaria.messages.validate import is_valid_call_id

_INVALID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_LEN = 64


def normalise_tool_call_ids(messages: Sequence[Message]) -> tuple[list[Message], dict[str, str]]:
    """Give every assistant tool call a valid, unique id and rename its results to match.

    A result answers the most recent call that had its original id, so a reused ``call_0`` is
    paired turn by turn. Returns a new list (untouched messages are shared, inputs are never
    mutated) and a mapping from each new id to the original one (the original may repeat, the
    new one never does; a missing original is ``""``).
    """
    namer = _Namer(_valid_ids(messages))
    latest: dict[str, deque[str]] = {}
    out: list[Message] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            out.append(message)
        elif message.get("role") == "assistant" and isinstance(message.get("tool_calls"), list):
            out.append(_rename_calls(cast(AssistantMessage, message), index, namer, latest))
        elif message.get("role") == "tool":
            out.append(_rename_result(cast(ToolMessage, message), latest))
        else:
            out.append(message)
    return out, namer.mapping


def _valid_ids(messages: Sequence[Message]) -> set[str]:
    """Ids already valid somewhere in the history: fresh names must not collide with them."""
    found: set[str] = set()
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant":
            calls = message.get("tool_calls")
            for call in calls if isinstance(calls, list) else ():
                call_id = call.get("id") if isinstance(call, dict) else None
                if is_valid_call_id(call_id):
                    found.add(call_id)
    return found


class _Namer:
    """Hands out ids: an original keeps its id on first use, anything else gets a fresh one."""

    def __init__(self, reserved: set[str]) -> None:
        self.reserved = reserved
        self.used: set[str] = set()
        self.next_suffix: dict[str, int] = {}
        self.mapping: dict[str, str] = {}

    def assign(self, original: object, index: int, position: int) -> str:
        if is_valid_call_id(original) and original not in self.used:
            self.used.add(original)
            return original
        fresh = self._fresh(original, index, position)
        self.used.add(fresh)
        self.mapping[fresh] = original if isinstance(original, str) else ""
        return fresh

    def _fresh(self, original: object, index: int, position: int) -> str:
        base = _INVALID_CHARS.sub("_", original)[:_MAX_LEN] if isinstance(original, str) else ""
        if not base:
            base = "call_" + hashlib.sha1(f"{index}:{position}".encode()).hexdigest()[:24]
        candidate = base
        while candidate in self.used or candidate in self.reserved:
            number = self.next_suffix.get(base, 2)
            self.next_suffix[base] = number + 1
            suffix = f"_{number}"
            candidate = base[: _MAX_LEN - len(suffix)] + suffix
        return candidate


def _rename_calls(
    message: AssistantMessage, index: int, namer: _Namer, latest: dict[str, deque[str]]
) -> AssistantMessage:
    calls: list[Any] = message["tool_calls"]
    renamed: list[Any] = []
    this_turn: dict[str, deque[str]] = {}
    for position, call in enumerate(calls):
        if not isinstance(call, dict):
            renamed.append(call)
            continue
        original = call.get("id")
        new_id = namer.assign(original, index, position)
        if isinstance(original, str):
            this_turn.setdefault(original, deque()).append(new_id)
        renamed.append(call if new_id == original else {**call, "id": new_id})
    latest.update(this_turn)
    if all(new is old for new, old in zip(renamed, calls, strict=True)):
        return message
    return {**message, "tool_calls": renamed}


def _rename_result(message: ToolMessage, latest: dict[str, deque[str]]) -> ToolMessage:
    call_id = message.get("tool_call_id")
    queue = latest.get(call_id) if isinstance(call_id, str) else None
    if not queue:
        return message
    new_id = queue.popleft() if len(queue) > 1 else queue[0]
    return message if new_id == call_id else {**message, "tool_call_id": new_id}
