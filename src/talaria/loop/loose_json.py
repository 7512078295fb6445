"""JSON as small models write it: objects inside prose, Python literals, raw newlines.

A model that writes a tool call as text rarely writes one clean JSON document: it puts prose
around it, several objects in a row, ``True``/``None`` for ``true``/``null``, single-quoted
strings, or a file's content with real line breaks inside a string. `objects_in` finds every
top-level object in such a text and `loads` decodes one, trying strict JSON first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

MAX_TEXT = 200_000
"""Characters scanned for objects; a longer answer is not searched past this."""
MAX_STARTS = 64
"""Opening braces tried per text, so that prose full of braces costs linear time at most."""

_TOKEN = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[{}\[\]]", re.DOTALL)
"""A quoted string (skipped whole) or a bracket."""
_WORD_OR_STRING = re.compile(
    r"(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')|\b(true|false|null|True|False|None)\b", re.DOTALL
)
_AS_JSON = {"True": "true", "False": "false", "None": "null"}
_AS_PYTHON = {"true": "True", "false": "False", "null": "None"}
_LENIENT = json.JSONDecoder(strict=False)
"""Accepts control characters (real line breaks) inside strings."""


def objects_in(text: str) -> Iterator[tuple[int, int, Any]]:
    """(start, end, value) of each top-level ``{...}`` in `text` that decodes to a dict, left
    to right; an object nested in one already found is part of it."""
    text = text[:MAX_TEXT]
    position = tries = 0
    while tries < MAX_STARTS:
        start = text.find("{", position)
        if start < 0:
            return
        tries += 1
        end = balanced_end(text, start)
        value = loads(text[start:end]) if end is not None else None
        if end is not None and isinstance(value, dict):
            yield start, end, value
            position = end
        else:
            position = start + 1


def balanced_end(text: str, start: int) -> int | None:
    """Where the bracket opened at `start` closes (quoted strings skipped), or None."""
    depth = 0
    for token in _TOKEN.finditer(text, start):
        mark = token.group()
        if mark in "{[":
            depth += 1
        elif mark in "}]":
            depth -= 1
            if depth == 0:
                return token.end()
    return None


def loads(text: str) -> Any:
    """The value `text` spells as JSON, as JSON with Python's words, or as a Python literal;
    None when it is none of these (or the value cannot be sent as JSON)."""
    for attempt in (_strict, _with_json_words, _python_literal):
        try:
            value = attempt(text)
            json.dumps(value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            continue
        return value
    return None


def _strict(text: str) -> Any:
    return _LENIENT.decode(text.strip())


def _with_json_words(text: str) -> Any:
    return _LENIENT.decode(_replace_words(text, _AS_JSON).strip())


def _python_literal(text: str) -> Any:
    import ast  # only for answers that are not JSON

    value = ast.literal_eval(_replace_words(text, _AS_PYTHON, escape_newlines=True).strip())
    return _as_json_value(value)


def _replace_words(text: str, words: dict[str, str], *, escape_newlines: bool = False) -> str:
    """`text` with the given bare words replaced outside strings (and, for Python, raw line
    breaks inside strings escaped: a Python string literal may not span lines)."""

    def swap(match: re.Match[str]) -> str:
        quoted, word = match.group(1), match.group(2)
        if quoted is not None:
            return quoted.replace("\n", "\\n") if escape_newlines else quoted
        return words.get(word, word)

    return _WORD_OR_STRING.sub(swap, text)


def _as_json_value(value: Any) -> Any:
    """A literal's value with tuples as lists; TypeError for what JSON cannot hold."""
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise TypeError("object keys must be strings")
        return {key: _as_json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_as_json_value(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"{type(value).__name__} is not a JSON value")
