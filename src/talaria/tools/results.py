"""Turn a handler's return value into the text the model reads, and keep that text bounded.

A huge tool result would eat the context window and every later request would pay for it, so
only the head and tail are kept; the full text is written to a file the model can read in
pieces when it needs the middle.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_-]+")
_KEEP_FRACTION = 0.4


def serialise_result(value: Any) -> str:
    """str as is, None as "", containers as compact JSON, bytes as a notice, else str()."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray | memoryview):
        return f"[binary output ({len(bytes(value))} bytes) not shown]"
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return str(value)


def cap_result(
    text: str,
    *,
    limit: int = 50_000,
    spill_dir: Path | None = None,
    call_id: str,
    tool_name: str,
) -> str:
    """Return `text` unchanged if it fits in `limit` characters, else head + marker + tail.

    With `spill_dir`, the full text is saved there and the marker gives its path. A failed
    save is reported in the marker instead of raised: the call itself succeeded.
    """
    if len(text) <= limit:
        return text
    keep = max(1, int(limit * _KEEP_FRACTION))
    head = _cut_at_line(text[:keep], from_end=False)
    tail = _cut_at_line(text[-keep:], from_end=True)
    omitted = len(text) - len(head) - len(tail)
    marker = f"[... {omitted:,} of {len(text):,} characters omitted here."
    if spill_dir is not None:
        marker += " " + _spill(text, spill_dir, call_id, tool_name)
    return f"{head}\n{marker} ...]\n{tail}"


def _cut_at_line(piece: str, *, from_end: bool) -> str:
    """Trim to a whole line when one ends within the last fifth, so lines are not split."""
    slack = len(piece) // 5
    if from_end:
        newline = piece.find("\n", 0, slack)
        return piece[newline + 1 :] if newline >= 0 else piece
    newline = piece.rfind("\n", len(piece) - slack)
    return piece[:newline] if newline >= 0 else piece


def _spill(text: str, spill_dir: Path, call_id: str, tool_name: str) -> str:
    name = "-".join(_UNSAFE_NAME.sub("_", part) for part in (tool_name, call_id) if part)
    path = Path(spill_dir) / f"{name or 'result'}.txt"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        return f"The full output could not be saved ({exc})."
    return f"The full output is saved in {path}; read that file to see the omitted part."
