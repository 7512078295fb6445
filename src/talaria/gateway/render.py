"""Text as chat platforms take it: answers split at the platform's limit without breaking a
code block, and the one-line summaries of tool calls that the progress message shows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FENCE = "```"
ARGUMENT_CHARS = 60
RESULT_CHARS = 80


def split_message(text: str, limit: int) -> list[str]:
    """`text` in parts of at most `limit` characters, cut between lines where it can. A code
    block cut in two is closed at the end of one part and opened again (with its language)
    at the start of the next, so each part renders on its own."""
    if len(text) <= limit:
        return [text]
    parts: list[str] = []
    current: list[str] = []
    size = 0
    fence: str | None = None  # the opening line of the code block we are in
    carried = 0  # lines of `current` that only reopen the block (nothing of the text's own)

    def close() -> None:
        nonlocal current, size, carried
        body = "\n".join(current)
        if fence is not None:
            body += "\n" + FENCE
        if body.strip():
            parts.append(body)
        current = [fence] if fence is not None else []
        size = len(fence) + 1 if fence is not None else 0
        carried = len(current)

    reserve = len(FENCE) + 1
    for line in text.split("\n"):
        for piece in _pieces(line, max(1, limit - reserve - (len(fence) + 1 if fence else 0))):
            if current and size + len(piece) + reserve > limit:
                close()
            current.append(piece)
            size += len(piece) + 1
        if line.lstrip().startswith(FENCE):
            fence = None if fence is not None else line.strip()
    rest = "\n".join(current)
    if len(current) > carried and rest.strip():
        parts.append(rest)
    return parts


def _pieces(line: str, width: int) -> list[str]:
    """A line longer than `width` cut into pieces (at spaces where possible)."""
    pieces = []
    while len(line) > width:
        cut = line.rfind(" ", 0, width)
        cut = cut if cut > width // 2 else width
        pieces.append(line[:cut])
        line = line[cut:].lstrip(" ")
    pieces.append(line)
    return pieces


def _short(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def tool_started(name: str, arguments: Mapping[str, Any]) -> str:
    """`terminal: ls -la`: the tool and its main argument, never the JSON."""
    main = next((v for v in arguments.values() if isinstance(v, str) and v.strip()), "")
    return f"{name}: {_short(main, ARGUMENT_CHARS)}" if main else name


def tool_finished(line: str, result: str, is_error: bool) -> str:
    """The started line with how it ended and the first words of the result."""
    mark = "✗" if is_error else "✓"
    shown = _short(result, RESULT_CHARS)
    return f"{mark} {line}" + (f" → {shown}" if shown else "")
