"""Tool calls a model wrote as text instead of as a tool call.

Small local models, or servers started without their tool-call parser, put the call in the
answer: `<tool_call>{...}</tool_call>` (Qwen, Hermes), `{"name": ..., "parameters": ...}`
(Llama, optionally after `<|python_tag|>`), `[TOOL_CALLS] [...]` (Mistral), or JSON objects
fenced or bare, with prose around them, several in a row, in Python's spelling
(`loop.loose_json`). Every object of a call's shape is read as a call: a tool that was not
offered or arguments that do not fit reach the model as that call's error, which it can act
on, instead of ending the turn with the raw JSON as the answer. An object that names an
offered tool but cannot be decoded becomes a call with its raw arguments, so the model is
told what is wrong with them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from talaria.loop.loose_json import balanced_end, loads, objects_in

CALL_KEYS = frozenset({"name", "arguments", "parameters", "args", "type", "id", "function"})
"""The keys of a call object; any other key makes it data, unless it names an offered tool
and carries arguments."""
_ARGUMENT_KEYS = ("arguments", "parameters", "args")
MARKERS = ("<tool_call>", "</tool_call>", "[TOOL_CALLS]", "<|python_tag|>")
_MISTRAL_NAMED = re.compile(r"\[TOOL_CALLS\]\s*([A-Za-z0-9_.-]+)\s*\[ARGS\]\s*")
_EMPTY_FENCE = re.compile(r"```[A-Za-z_-]*[\s\[\],]*(?:```|$)")
"""A fence the calls left empty, or left open at the end (the answer was cut off in it)."""
_NAMED = re.compile(r"""["']name["']\s*:\s*["']([A-Za-z0-9_.:-]+)["']""")
_ARGUMENTS_AT = re.compile(r"""["'](?:arguments|parameters|args)["']\s*:\s*""")


@dataclass(frozen=True, slots=True)
class TextCall:
    """One call read from an answer's text."""

    id: str
    name: str
    arguments: str
    """JSON text of the arguments; the raw text when it could not be decoded (the tool's
    argument check then tells the model what is wrong)."""


@dataclass(frozen=True, slots=True)
class TextCalls:
    """The calls an answer spells, and its text without them."""

    calls: list[TextCall]
    text: str
    """What is left of the answer around the calls (often nothing)."""
    closed: bool = True
    """Every call's object closed; False for a call that names an offered tool but does not
    decode (cut off, a missing comma)."""


def find_text_tool_calls(
    text: str, tools: Collection[str], *, cut_off: bool = False
) -> TextCalls | None:
    """The calls `text` spells, given the names of the offered tools; None when it spells
    none (prose, data that is not a call). `cut_off`: the output limit stopped the answer, so
    what follows the last call whose object closed is dropped (the cut-off remainder, often a
    half-written call)."""
    if not text or not tools or "{" not in text:
        return None
    spans: list[tuple[int, int]] = []
    found: list[tuple[str, Any]] = []
    named = _MISTRAL_NAMED.search(text)
    if named:
        start = text.find("{", named.end())
        end = balanced_end(text, start) if start == named.end() else None
        arguments = loads(text[start:end]) if end is not None else None
        if isinstance(arguments, dict):
            spans.append((named.start(), end or start))
            found.append((named.group(1), arguments))
    for start, end, value in objects_in(text):
        if any(s <= start < e for s, e in spans):
            continue
        call = as_call(value, tools)
        if call is not None:
            spans.append((start, end))
            found.append(call)
    closed = bool(found)
    if closed and cut_off:
        text = text[: max(end for _, end in spans)]
    elif not closed:
        broken = _undecodable_call(text, tools)
        if broken is None:
            return None
        spans, found = [broken[0]], [broken[1]]
    calls = [
        TextCall(_call_id(text, number), name, _arguments_text(arguments))
        for number, (name, arguments) in enumerate(found)
    ]
    return TextCalls(calls, _rest(text, spans), closed)


def as_call(value: Any, tools: Collection[str]) -> tuple[str, Any] | None:
    """(name, arguments) for the shapes models write a call in; None for other data."""
    if not isinstance(value, dict):
        return None
    function = value.get("function")
    if isinstance(function, dict) and "name" in function:
        return as_call(function, tools)
    name = value.get("name")
    if not isinstance(name, str) or not name:
        return None
    key = next((k for k in _ARGUMENT_KEYS if k in value), None)
    arguments = value[key] if key else {}
    extra = set(value) - CALL_KEYS
    if extra and not (key and name in tools):
        return None
    if key is None and name not in tools:
        return None  # {"name": "Alice"} is data; {"name": "todo"} calls a tool without arguments
    if not isinstance(arguments, dict | str) and arguments is not None:
        return None
    return name, arguments if arguments is not None else {}


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        decoded = loads(arguments) if arguments.strip() else {}
        return arguments if decoded is None else json.dumps(decoded)
    return json.dumps(arguments)


def _undecodable_call(text: str, tools: Collection[str]) -> tuple[tuple[int, int], Any] | None:
    """A call object that names an offered tool but does not decode (cut off, bad quoting):
    its span and (name, raw arguments)."""
    for match in _NAMED.finditer(text):
        if match.group(1) not in tools:
            continue
        start = text.rfind("{", 0, match.start())
        if start < 0:
            continue
        end = balanced_end(text, start) or len(text)
        body = text[start:end]
        if loads(body) is not None:
            continue  # it decodes: data that mentions a tool, not a broken call
        at = _ARGUMENTS_AT.search(body)
        raw = body[at.end() :].rstrip().removesuffix("}") if at else body
        return (start, end), (match.group(1), raw.strip() or "{")
    return None


def _rest(text: str, spans: list[tuple[int, int]]) -> str:
    """The answer without the calls, their markers and the fences and brackets they leave."""
    kept, position = [], 0
    for start, end in sorted(spans):
        kept.append(text[position:start])
        position = max(position, end)
    kept.append(text[position:])
    rest = "".join(kept)
    for marker in MARKERS:
        rest = rest.replace(marker, "")
    rest = _EMPTY_FENCE.sub("", rest)
    return "" if not rest.strip(" \t\r\n[],") else rest.strip()


def _call_id(source: str, number: int) -> str:
    """Stable per answer, so a replayed turn gets the same ids."""
    import hashlib

    digest = hashlib.sha1(source.encode("utf-8", "replace")).hexdigest()[:12]
    return f"call_text_{digest}_{number}"
