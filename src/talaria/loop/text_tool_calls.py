"""Tool calls a model wrote as text instead of as a tool call.

Small local models, or servers started without their tool-call parser, put the call in the
answer: `<tool_call>{...}</tool_call>` (Qwen), `{"name": ..., "parameters": ...}` (Llama,
optionally after `<|python_tag|>`), `[TOOL_CALLS] [...]` (Mistral), or a JSON object fenced
or bare. Such an answer is read as the call(s) it spells, but only when every call names a
tool that was offered and its arguments pass that tool's schema, and, without an explicit
marker, when the JSON is the answer itself rather than an example inside prose.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from talaria.tools.validate import ArgumentError, validate_arguments
from talaria.values import frozen

MAX_LEAD_IN = 200
"""Characters of prose allowed before a fenced call ("I'll list the files:")."""
_QWEN = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_MISTRAL = "[TOOL_CALLS]"
_MISTRAL_NAMED = re.compile(r"\[TOOL_CALLS\]\s*([A-Za-z0-9_-]+)\s*\[ARGS\]\s*")
_LLAMA_TAG = "<|python_tag|>"
_FENCE = re.compile(r"```[A-Za-z_]*[ \t]*\n(.*?)\n?```", re.DOTALL)
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "args", "type", "id", "function"})


@frozen(slots=True)
class TextCall:
    id: str
    name: str
    arguments: dict[str, Any]


@frozen(slots=True)
class TextCalls:
    calls: list[TextCall]
    text: str
    """What is left of the answer around the calls (often nothing)."""


def find_text_tool_calls(text: str, tools: Mapping[str, dict[str, Any]]) -> TextCalls | None:
    """The calls `text` spells, given the offered tools (name -> parameters schema); None
    when it is an answer (prose, an example, an unknown tool, arguments that do not fit)."""
    if not text or not tools or "{" not in text:
        return None
    for found in _candidates(text):
        payload, rest = found
        calls = _valid_calls(payload, tools, text)
        if calls:
            return TextCalls(calls, rest.strip())
    return None


def _candidates(text: str) -> Iterator[tuple[Any, str]]:
    """(decoded JSON, the text around it) for each form, explicit markers first."""
    if "<tool_call>" in text:
        payloads = [_decode(body) for body in _QWEN.findall(text)]
        if payloads and all(p is not None for p in payloads):
            yield payloads, _QWEN.sub("", text)
    named = _MISTRAL_NAMED.search(text)
    if named:
        arguments, end = _decode_prefix(text[named.end() :])
        if isinstance(arguments, dict):
            rest = text[: named.start()] + text[named.end() + end :]
            yield {"name": named.group(1), "arguments": arguments}, rest
    for marker in (_MISTRAL, _LLAMA_TAG):
        at = text.find(marker)
        if at >= 0:
            payload, end = _decode_prefix(text[at + len(marker) :].lstrip())
            if payload is not None:
                yield payload, text[:at]
    fences = _FENCE.findall(text)
    if len(fences) == 1:
        match = _FENCE.search(text)
        assert match is not None
        lead, after = text[: match.start()].strip(), text[match.end() :].strip()
        if not after and len(lead) <= MAX_LEAD_IN and "\n\n" not in lead:
            payload = _decode(fences[0])
            if payload is not None:
                yield payload, lead
    bare = _decode(text)
    if bare is not None:
        yield bare, ""


def _decode(text: str) -> Any:
    try:
        return json.loads(text.strip())
    except ValueError:
        return None


def _decode_prefix(text: str) -> tuple[Any, int]:
    """The JSON value at the start of `text` and where it ends (None, 0 when there is none)."""
    stripped = text.lstrip()
    try:
        value, end = json.JSONDecoder().raw_decode(stripped)
    except ValueError:
        return None, 0
    return value, end + len(text) - len(stripped)


def _valid_calls(
    payload: Any, tools: Mapping[str, dict[str, Any]], source: str
) -> list[TextCall] | None:
    items = payload if isinstance(payload, list) else [payload]
    flat = [inner for item in items for inner in (item if isinstance(item, list) else [item])]
    calls: list[TextCall] = []
    for number, item in enumerate(flat):
        call = _as_call(item)
        if call is None or call[0] not in tools:
            return None
        name, raw = call
        try:
            arguments = validate_arguments(tools[name], raw)
        except ArgumentError:
            return None
        calls.append(TextCall(_call_id(source, number), name, arguments))
    return calls or None


def _as_call(item: Any) -> tuple[str, dict[str, Any] | str] | None:
    """(name, arguments) for the shapes models write; None for any other object."""
    if not isinstance(item, dict) or set(item) - _CALL_KEYS:
        return None
    function = item.get("function")
    if isinstance(function, dict):
        return _as_call(function)
    name = item.get("name")
    arguments = next(
        (item[key] for key in ("arguments", "parameters", "args") if key in item), None
    )
    if not isinstance(name, str) or not isinstance(arguments, dict | str):
        return None
    return name, arguments


def _call_id(source: str, number: int) -> str:
    """Stable per answer, so a replayed turn gets the same ids."""
    digest = hashlib.sha1(source.encode("utf-8", "replace")).hexdigest()[:12]
    return f"call_text_{digest}_{number}"
