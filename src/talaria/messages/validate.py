"""The canonical validity rules for a history about to be sent to a provider.

These are the rules the strictest wire APIs enforce (OpenAI rejects unanswered tool calls,
Anthropic rejects empty text blocks, consecutive same-role turns and ids outside
``^[a-zA-Z0-9_-]{1,64}$``). `history_problems` states them once; `repair_history` must leave
none of them broken, and the scripted test provider can use the same list to reject a request
the way a real endpoint would.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, TypeGuard

from talaria import fastjson

ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
_CALL_ID_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def is_valid_call_id(value: object) -> TypeGuard[str]:
    """True for an id every provider accepts (Anthropic's rule is the narrowest)."""
    return isinstance(value, str) and _CALL_ID_RE.fullmatch(value) is not None


def is_blank(text: object) -> bool:
    """True unless `text` is a string with something other than whitespace in it."""
    return not isinstance(text, str) or not text.strip()


def arguments_problem(arguments: object) -> str | None:
    """Why tool-call arguments are unusable, or None when they are a JSON object in a string."""
    if not isinstance(arguments, str):
        return "arguments are not a string"
    return _string_arguments_problem(arguments)


@lru_cache(maxsize=16384)
def _string_arguments_problem(arguments: str) -> str | None:
    """Cached: the loop validates the same history (the same argument strings) every call."""
    try:
        parsed = fastjson.loads(arguments)
    except (ValueError, RecursionError):
        return "arguments are not valid JSON"
    if not isinstance(parsed, dict):
        return "arguments are not a JSON object"
    return None


def part_problem(part: object) -> str | None:
    """Why one element of list content would be rejected, or None when it is usable."""
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        return "is not a typed object"
    if part["type"] == "text" and is_blank(part.get("text")):
        return "is an empty text part"
    return None


def content_problem(content: object, *, may_be_empty: bool) -> str | None:
    """Why `content` is unusable: a wrong type, a bad part, or nothing in it when it needs text."""
    if content is None or isinstance(content, str):
        empty = is_blank(content)
    elif isinstance(content, list):
        for index, part in enumerate(content):
            problem = part_problem(part)
            if problem:
                return f"content part {index} {problem}"
        empty = not content
    else:
        return f"content is a {type(content).__name__}, not a string, a list of parts or null"
    if empty and not may_be_empty:
        return "content is empty"
    return None


def tool_call_problem(call: object) -> str | None:
    """Why one entry of an assistant's ``tool_calls`` is malformed (ids are checked separately)."""
    if not isinstance(call, dict):
        return "is not an object"
    if call.get("type") != "function":
        return "has a type other than 'function'"
    function = call.get("function")
    if not isinstance(function, dict) or is_blank(function.get("name")):
        return "has no function name"
    if not is_valid_call_id(call.get("id")):
        return f"has an invalid id {call.get('id')!r}"
    return arguments_problem(function.get("arguments"))


class HistoryScan:
    """One scan over the history; the state is what a provider tracks while reading it.
    `problems` so far, and `pending` calls still waiting for their results."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.seen_ids: set[str] = set()
        self.pending: list[str] = []
        self.pending_from = -1
        self.previous_role: str | None = None

    def add(self, index: int, problem: str) -> None:
        self.problems.append(f"message {index}: {problem}")

    def check(self, index: int, message: object) -> None:
        if not isinstance(message, dict):
            self.add(index, "is not an object")
            self.previous_role = None
            return
        role = message.get("role")
        if not isinstance(role, str) or role not in ROLES:
            self.add(index, f"has an unknown role {role!r}")
            self.previous_role = None
            return
        if role != "tool":
            self._close_pending(index)
            if role == self.previous_role and role in ("user", "assistant"):
                self.add(index, f"is the second {role} message in a row")
            if message.get("tool_calls") is not None and role != "assistant":
                self.add(index, f"a {role} message carries tool_calls")
        _ROLE_CHECKS[role](self, index, message)
        self.previous_role = role

    def finish(self, count: int) -> list[str]:
        self._close_pending(count)
        return self.problems

    def _close_pending(self, index: int) -> None:
        if self.pending:
            self.add(
                self.pending_from,
                f"tool calls {self.pending} have no result before message {index}",
            )
            self.pending = []

    def system(self, index: int, message: dict[str, Any]) -> None:
        if index != 0:
            self.add(index, "a system message after the start of the history")
        problem = content_problem(message.get("content"), may_be_empty=False)
        if problem:
            self.add(index, problem)

    def user(self, index: int, message: dict[str, Any]) -> None:
        problem = content_problem(message.get("content"), may_be_empty=False)
        if problem:
            self.add(index, problem)

    def assistant(self, index: int, message: dict[str, Any]) -> None:
        calls = message.get("tool_calls")
        if calls is not None and (not isinstance(calls, list) or not calls):
            self.add(index, "tool_calls is not a non-empty list")
            calls = None
        problem = content_problem(message.get("content"), may_be_empty=bool(calls))
        if problem:
            self.add(index, problem)
        for position, call in enumerate(calls or ()):
            self._check_call(index, position, call)

    def _check_call(self, index: int, position: int, call: object) -> None:
        problem = tool_call_problem(call)
        if problem:
            self.add(index, f"tool call {position} {problem}")
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(call_id, str):
            return
        if call_id in self.seen_ids:
            self.add(index, f"tool call id {call_id!r} is used twice")
        self.seen_ids.add(call_id)
        if not self.pending:
            self.pending_from = index
        self.pending.append(call_id)

    def tool(self, index: int, message: dict[str, Any]) -> None:
        if not isinstance(message.get("content"), str):
            self.add(index, "tool result content is not a string")
        call_id = message.get("tool_call_id")
        if self.pending and call_id == self.pending[0]:
            self.pending.pop(0)
        elif self.pending:
            self.add(index, f"result for {call_id!r} where {self.pending[0]!r} was expected")
        else:
            self.add(index, f"tool result {call_id!r} does not answer a preceding tool call")


_ROLE_CHECKS = {
    "system": HistoryScan.system,
    "user": HistoryScan.user,
    "assistant": HistoryScan.assistant,
    "tool": HistoryScan.tool,
}


def history_problems(messages: Sequence[object]) -> list[str]:
    """Every rule the history breaks, as short sentences naming the message index.

    An empty list means a provider will accept the history. Empty tool results are allowed
    (providers take them); `repair_history` still rewrites them to ``(no output)``.
    """
    return scan_history(messages).finish(len(messages))


def scan_history(messages: Sequence[object]) -> HistoryScan:
    """The scan of `messages` left open: more messages can be checked against its state."""
    checker = HistoryScan()
    for index, message in enumerate(messages):
        checker.check(index, message)
    start = 1 if messages and _role(messages[0]) == "system" else 0
    if len(messages) > start and _role(messages[start]) != "user":
        checker.add(start, "the first message after the system prompt is not a user message")
    return checker


def _role(message: object) -> object:
    return message.get("role") if isinstance(message, dict) else None
