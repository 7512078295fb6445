"""One pure pass that makes a history provider-valid (the valid-history invariant,
docs/architecture.md).

The loop runs this on the API copy before every model call, so a valid history takes a fast
path: one validation scan, no copies. A broken history (a crash between a tool call and its
result, an edited session file, a provider that reuses ids) goes through a short pipeline:
clean each message, normalise ids, pair results with their calls, merge same-role neighbours,
make sure a user turn comes first. Inputs are never mutated; a message that needs a fix is
replaced by a new dict and every other message is shared. Each fix is recorded and logged, so a
repaired request never hides what was changed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from talaria.core import Message, UserMessage, tool_calls_of
from talaria.messages.ids import normalise_tool_call_ids
from talaria.messages.validate import arguments_problem, history_problems, is_blank, part_problem

logger = logging.getLogger("talaria.repair")

MISSING_RESULT = "Error: no result was recorded for this tool call (it was interrupted or lost)."
EMPTY_RESULT = "(no output)"
EMPTY_USER = "(empty message)"
RESUMED = "(conversation resumed)"
SYSTEM_NOTE = "[System note] "
USER_BOUNDARY = "\n\n---\n\n"
"""Between merged user turns: visible to the model, so it can tell the messages apart."""


@dataclass(slots=True)
class RepairResult:
    """The repaired API copy and one sentence per fix (empty when nothing was wrong)."""

    messages: list[Message]
    repairs: list[str] = field(default_factory=list)


def repair_history(messages: Sequence[Message]) -> RepairResult:
    """Return a provider-valid copy of `messages`; `history_problems` of it is always empty."""
    if _already_valid(messages):
        return RepairResult(list(messages))
    repairs: list[str] = []
    cleaner = _Cleaner(messages, repairs)
    named, renamed = normalise_tool_call_ids(cleaner.run())
    repairs.extend(f"renamed tool call id {old!r} to {new!r}" for new, old in renamed.items())
    paired = _pair_results(named, repairs)
    merged = _merge_neighbours(paired, cleaner.note_ids, repairs)
    final = _user_first(merged, repairs)
    for repair in repairs:
        logger.info("repaired history: %s", repair)
    return RepairResult(final, repairs)


def _already_valid(messages: Sequence[Message]) -> bool:
    if history_problems(messages):
        return False
    return not any(m["role"] == "tool" and m["content"] == "" for m in messages)


class _Cleaner:
    """Per-message fixes, in one walk.

    A system message after the start becomes a user message of its own (a "note"); the merge
    pass later folds it into a neighbouring user turn, ahead of the user's own words.
    """

    def __init__(self, messages: Sequence[Message], repairs: list[str]) -> None:
        self.messages = messages
        self.repairs = repairs
        self.out: list[Message] = []
        self.note_ids: set[int] = set()
        self.last_user = max((i for i, m in enumerate(messages) if _role(m) == "user"), default=-1)

    def run(self) -> list[Message]:
        handlers = {
            "system": self._system,
            "user": self._user,
            "assistant": self._assistant,
            "tool": self._tool,
        }
        for index, message in enumerate(self.messages):
            role = _role(message)
            handler = handlers.get(role) if isinstance(role, str) else None
            if handler is None:
                self._note(index, f"dropped a message with unknown role {role!r}")
            else:
                handler(index, message)
        return self.out

    def _note(self, index: int, text: str) -> None:
        self.repairs.append(f"message {index}: {text}")

    def _content(self, index: int, message: Message) -> tuple[Any, bool]:
        content, note = _clean_content(message.get("content"))
        if note:
            self._note(index, note)
        return content, note is not None

    def _system(self, index: int, message: Message) -> None:
        content, changed = self._content(index, message)
        changed = self._drop_stray_calls(index, message) or changed
        if _is_empty(content):
            self._note(index, "dropped an empty system message")
        elif not self.out:
            self.out.append(_replace(message, content=content) if changed else message)
        else:
            note: UserMessage = {"role": "user", "content": SYSTEM_NOTE + _text_of(content)}
            self.note_ids.add(id(note))
            self.out.append(note)
            self._note(index, "turned a system message after the start into a user note")

    def _user(self, index: int, message: Message) -> None:
        content, changed = self._content(index, message)
        if _is_empty(content):
            if index != self.last_user:
                self._note(index, "dropped an empty user message")
                return
            content, changed = EMPTY_USER, True
            self._note(index, f"kept the last user message, empty, as {EMPTY_USER!r}")
        changed = self._drop_stray_calls(index, message) or changed
        self.out.append(_replace(message, content=content) if changed else message)

    def _assistant(self, index: int, message: Message) -> None:
        content, changed = self._content(index, message)
        calls, calls_changed = self._calls(index, message.get("tool_calls"))
        if not calls and _is_empty(content):
            self._note(index, "dropped an assistant message with no text and no tool calls")
        elif not (changed or calls_changed):
            self.out.append(message)
        elif calls:
            self.out.append(_replace(message, content=content, tool_calls=calls))
        else:
            self.out.append(_replace(message, content=content))

    def _tool(self, index: int, message: Message) -> None:
        content, note = _tool_content(message.get("content"))
        if note:
            self._note(index, note)
        changed = self._drop_stray_calls(index, message) or note is not None
        self.out.append(_replace(message, content=content) if changed else message)

    def _drop_stray_calls(self, index: int, message: Message) -> bool:
        if message.get("tool_calls") is None:
            return False
        self._note(index, f"removed tool_calls from a {message['role']} message")
        return True

    def _calls(self, index: int, raw: object) -> tuple[list[Any] | None, bool]:
        """The usable tool calls (None when there are none) and whether anything changed."""
        if raw is None:
            return None, False
        if not isinstance(raw, list) or not raw:
            self._note(index, "removed a tool_calls value that is not a non-empty list")
            return None, True
        kept: list[Any] = []
        for position, call in enumerate(raw):
            fixed, note = _clean_call(call)
            if note:
                self._note(index, f"tool call {position}: {note}")
            if fixed is not None:
                kept.append(fixed)
        if len(kept) == len(raw) and all(new is old for new, old in zip(kept, raw, strict=True)):
            return raw, False
        return kept or None, True


def _role(message: object) -> object:
    return message.get("role") if isinstance(message, dict) else None


def _replace(message: Message, **changes: Any) -> Message:
    """A new message with `changes`, never carrying tool_calls unless given them."""
    new = {key: value for key, value in message.items() if key != "tool_calls"}
    new.update(changes)
    return cast(Message, new)


def _is_empty(content: Any) -> bool:
    return not content if isinstance(content, list) else is_blank(content)


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if p["type"] == "text")
    return content if isinstance(content, str) else ""


def _as_text(value: object) -> str:
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _clean_content(content: Any) -> tuple[Any, str | None]:
    """Content with malformed or empty parts removed, and a note when something changed."""
    if content is None or isinstance(content, str):
        return content, None
    if not isinstance(content, list):
        return _as_text(content), f"turned {type(content).__name__} content into text"
    kept: list[Any] = []
    for part in content:
        if part_problem(part) is None:
            kept.append(part)
        elif not is_blank(part):
            kept.append({"type": "text", "text": part})
    if len(kept) == len(content) and all(
        new is old for new, old in zip(kept, content, strict=True)
    ):
        return content, None
    return kept, f"cleaned list content ({len(content)} parts, {len(kept)} kept as valid parts)"


def _tool_content(content: Any) -> tuple[str, str | None]:
    """Tool results are plain text on every wire API; empty ones still say something."""
    if isinstance(content, str) and content:
        return content, None
    if content is None or content == "":
        return EMPTY_RESULT, f"empty tool result set to {EMPTY_RESULT!r}"
    if isinstance(content, list):
        texts = [p["text"] for p in content if part_problem(p) is None and p["type"] == "text"]
        return "\n".join(texts) or EMPTY_RESULT, "flattened a list tool result into text"
    return _as_text(content), f"turned a {type(content).__name__} tool result into text"


def _clean_call(call: object) -> tuple[Any, str | None]:
    """A usable tool call (or None to drop it) and a note when it was changed."""
    if not isinstance(call, dict):
        return None, "dropped, it is not an object"
    function = call.get("function")
    if not isinstance(function, dict) or is_blank(function.get("name")):
        return None, "dropped, it has no function name"
    arguments, note = _fix_arguments(function.get("arguments"))
    notes = [note] if note else []
    if call.get("type") != "function":
        notes.append("set its type to 'function'")
    if not notes:
        return call, None
    fixed = {**call, "type": "function", "function": {**function, "arguments": arguments}}
    return fixed, "; ".join(notes)


def _fix_arguments(arguments: object) -> tuple[str, str | None]:
    if isinstance(arguments, str):
        problem = arguments_problem(arguments)
        return (arguments, None) if problem is None else ("{}", f"{problem}, replaced by {{}}")
    if isinstance(arguments, dict):
        try:
            encoded = json.dumps(arguments, default=str, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            return "{}", "arguments could not be encoded, replaced by {}"
        return encoded, "JSON-encoded arguments that were not a string"
    return "{}", "arguments were not a JSON object, replaced by {}"


def _pair_results(messages: list[Message], repairs: list[str]) -> list[Message]:
    """Put exactly one result right after each call, in call order; drop the rest."""
    call_at: dict[str, int] = {}
    for index, message in enumerate(messages):
        if message["role"] == "assistant":
            for call in message.get("tool_calls") or ():
                call_at[call["id"]] = index
    results: dict[str, Message] = {}
    result_at: dict[str, int] = {}
    for index, message in enumerate(messages):
        if message["role"] != "tool":
            continue
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or call_at.get(call_id, index) >= index:
            repairs.append(f"dropped a tool result for {call_id!r} that answers no earlier call")
        elif call_id in results:
            repairs.append(f"dropped a second result for tool call {call_id!r}")
        else:
            results[call_id] = message
            result_at[call_id] = index
    return _emit_pairs(messages, results, result_at, repairs)


def _emit_pairs(
    messages: list[Message],
    results: dict[str, Message],
    result_at: dict[str, int],
    repairs: list[str],
) -> list[Message]:
    non_tool_before = [0]
    for message in messages:
        non_tool_before.append(non_tool_before[-1] + (message["role"] != "tool"))
    out: list[Message] = []
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            continue
        out.append(message)
        previous = index
        for call in tool_calls_of(message):
            call_id = call["id"]
            result = results.get(call_id)
            if result is None:
                repairs.append(f"added an error result for unanswered tool call {call_id!r}")
                result = {"role": "tool", "tool_call_id": call_id, "content": MISSING_RESULT}
            else:
                at = result_at[call_id]
                if at < previous or non_tool_before[at] != non_tool_before[index + 1]:
                    repairs.append(f"moved the result of tool call {call_id!r} next to its call")
                previous = at
            out.append(result)
    return out


def _merge_neighbours(
    messages: list[Message], note_ids: set[int], repairs: list[str]
) -> list[Message]:
    """Merge runs of user (or assistant) messages into one; only tool messages may repeat.

    System notes go first in a merged user turn, so the user's latest words stay last.
    """
    out: list[Message] = []
    start = 0
    while start < len(messages):
        role = messages[start]["role"]
        end = start + 1
        if role in ("user", "assistant"):
            while end < len(messages) and messages[end]["role"] == role:
                end += 1
        if end - start == 1:
            out.append(messages[start])
        else:
            run = sorted(messages[start:end], key=lambda m: id(m) not in note_ids)
            out.append(_merge_run(run))
            repairs.append(f"merged {end - start} consecutive {role} messages")
        start = end
    return out


def _merge_run(run: list[Message]) -> Message:
    """The last message's fields (it owns any tool calls and replay state) with all the text.

    After pairing, only the last assistant of a run can have tool calls: a call is always
    followed by its results.
    """
    merged: dict[str, Any] = dict(run[-1])
    separator = USER_BOUNDARY if merged["role"] == "user" else "\n\n"
    merged["content"] = _join_contents([m.get("content") for m in run], separator)
    calls = [call for m in run for call in tool_calls_of(m)]
    if calls:
        merged["tool_calls"] = calls
    reasoning = [text for m in run if isinstance(text := m.get("reasoning"), str) and text.strip()]
    if reasoning:
        merged["reasoning"] = "\n\n".join(reasoning)
    return cast(Message, merged)


def _join_contents(contents: list[Any], separator: str) -> Any:
    if all(not isinstance(content, list) for content in contents):
        texts = [content for content in contents if not is_blank(content)]
        return separator.join(texts) if texts else None
    parts: list[Any] = []
    for content in contents:
        if isinstance(content, list):
            parts.extend(content)
        elif not is_blank(content):
            parts.append({"type": "text", "text": content})
    return parts


def _user_first(messages: list[Message], repairs: list[str]) -> list[Message]:
    start = 1 if messages and messages[0]["role"] == "system" else 0
    if len(messages) > start and messages[start]["role"] != "user":
        repairs.append(f"inserted {RESUMED!r} so that the conversation opens with a user turn")
        return [*messages[:start], {"role": "user", "content": RESUMED}, *messages[start:]]
    return messages
