"""Turn a handler's return value into the text the model reads, and keep that text bounded.

Whatever a handler returns becomes text or a `ToolError` the model reads, never an exception
that escapes the turn: a self-referencing dict, an int longer than Python prints by default, an
object whose `__str__` raises, bytes, a generator. Rendering runs user code (`__str__`, a
generator's body), so the executor runs it where it runs the handler.

A huge tool result would eat the context window and every later request would pay for it, so
only the head and tail are kept; the full text is written to a file the model can read in
pieces when it needs the middle.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from talaria.tools.base import ToolError

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_-]+")
_KEEP_FRACTION = 0.4
STREAM_BUDGET = 1_000_000
"""Characters taken from a generator a tool returns; an endless one stops here."""
STREAM_ITEMS = 100_000
"""Items taken from a generator, so an endless stream of empty items stops too."""
_DEPTH = 100
_HUGE_INT_BITS = 400_000
"""About 120,000 digits: a longer number is described, not printed (the cap would cut it)."""
_UNPRINTABLE = "(a value that cannot be shown as text)"


def serialise_result(value: Any, budget: int = STREAM_BUDGET) -> str:
    """str as is, None as "", containers as compact JSON, bytes as a notice, a generator's
    items one per line (up to `budget` characters), else str(). A value that has no text
    (its `__str__` raises) is a `ToolError`; an error raised by a generator's body propagates
    as the tool's own failure."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray | memoryview):
        return f"[binary output ({len(bytes(value))} bytes) not shown]"
    if isinstance(value, Mapping | list | tuple | set | frozenset):
        return _dumps(_plain(value, set(), 0))
    if isinstance(value, Iterator):
        return _drain(value, budget)
    text = _text(value)
    if text is None:
        raise ToolError("the tool returned a value that cannot be shown as text")
    return text


def _drain(items: Iterator[Any], budget: int) -> str:
    lines: list[str] = []
    used = 0
    for count, item in enumerate(items):
        if used > budget or count >= STREAM_ITEMS:
            lines.append("[... the tool kept producing output; the rest was not read]")
            break
        line = serialise_result(item, budget - used)
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def _dumps(plain: Any) -> str:
    return json.dumps(plain, ensure_ascii=False, separators=(",", ":"))


def _plain(value: Any, seen: set[int], depth: int) -> Any:
    """`value` as JSON-ready data: cycles, depth, huge numbers and unprintable objects are
    replaced by a short description instead of failing the whole result."""
    if value is None or isinstance(value, str | bool | float):
        return value
    if isinstance(value, int):
        return value if _printable(value) else _number_text(value)
    if not isinstance(value, Mapping | list | tuple | set | frozenset):
        if isinstance(value, bytes | bytearray):
            return _binary(value)
        text = _text(value)
        return _UNPRINTABLE if text is None else text
    if id(value) in seen:
        return "(a reference back to itself)"
    if depth >= _DEPTH:
        return "(nested too deeply to show)"
    seen.add(id(value))
    try:
        if isinstance(value, Mapping):
            return {_key(key): _plain(item, seen, depth + 1) for key, item in value.items()}
        return [_plain(item, seen, depth + 1) for item in _ordered(value)]
    finally:
        seen.discard(id(value))


def _ordered(items: Iterable[Any]) -> list[Any]:
    if isinstance(items, set | frozenset):
        try:
            return sorted(items)
        except TypeError:  # mixed kinds: any order is as good
            return list(items)
    return list(items)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    plain = _plain(key, set(), 0)
    return plain if isinstance(plain, str) else _dumps(plain)


def _binary(value: bytes | bytearray) -> str:
    return f"[binary data ({len(value)} bytes) not shown]"


def _printable(value: int) -> bool:
    try:
        str(value)
    except ValueError:  # longer than the process's int-to-text limit
        return False
    return True


def _number_text(value: int) -> str:
    """A whole number of any length (Python refuses str() past 4,300 digits by default, a
    process-wide limit a library must not change; `decimal` has no such limit)."""
    if abs(value).bit_length() > _HUGE_INT_BITS:
        return f"(a whole number of about {int(abs(value).bit_length() * 0.30103):,} digits)"
    import decimal

    return str(decimal.Decimal(value))


def _text(value: Any) -> str | None:
    """str(value), or None when its `__str__` fails or returns something else."""
    if isinstance(value, int) and not _printable(value):
        return _number_text(value)
    try:
        text = str(value)
    except Exception:
        return None
    return text if isinstance(text, str) else None


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
