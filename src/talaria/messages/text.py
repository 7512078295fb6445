"""Text integrity: every string that enters a history can be stored and sent.

Models, tools, files and file names can hand us strings Python holds but UTF-8 cannot encode
(lone surrogates, from broken model output or from `surrogateescape`d file names). One such
character used to make every later save fail; here it becomes U+FFFD at the door.
"""

from __future__ import annotations

from typing import Any

REPLACEMENT = "\ufffd"


def is_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def clean_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (the same object when valid)."""
    if is_encodable(text):
        return text
    return "".join(REPLACEMENT if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)


def clean_value(value: Any) -> Any:
    """`clean_text` through a JSON-like value (a message, tool arguments); the value itself
    when nothing in it needs cleaning."""
    if not _needs_cleaning(value):
        return value
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_value(key): clean_value(item) for key, item in value.items()}
    return [clean_value(item) for item in value]


def _needs_cleaning(value: Any) -> bool:
    if isinstance(value, str):
        return not is_encodable(value)
    if isinstance(value, dict):
        return any(_needs_cleaning(k) or _needs_cleaning(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_needs_cleaning(item) for item in value)
    return False
