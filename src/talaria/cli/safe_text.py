"""Model and tool text made safe for a terminal.

Text from a model or a command can carry terminal control sequences: OSC 52 writes the
clipboard, OSC 0/2 retitle the window, CSI sequences move the cursor or clear the screen, and
DCS/APC strings talk to the terminal itself. None of that may reach the user's terminal. The
renderer's own colours (SGR) are the only sequences `terminal_safe` lets through.
"""

from __future__ import annotations

import re

_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI ... final byte (cursor moves, clears, SGR)
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC (title, clipboard, links)
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]"  # other escapes (reset, save/restore cursor, charsets)
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 and C1 control characters except tab and newline (a lone ESC, CR, BEL, backspace)."""
_SGR = re.compile(r"\x1b\[[0-9;:]*m")


def clean(text: str) -> str:
    """`text` without any control sequence or control character (tabs and newlines stay)."""
    return _CONTROLS.sub("", _SEQUENCES.sub("", text))


def terminal_safe(text: str) -> str:
    """Like `clean`, but colour and style codes (SGR) stay: for the renderer's own output."""
    if "\x1b" not in text and not _CONTROLS.search(text):
        return text
    parts: list[str] = []
    last = 0
    for match in _SGR.finditer(text):
        parts += [clean(text[last : match.start()]), match.group(0)]
        last = match.end()
    parts.append(clean(text[last:]))
    return "".join(parts)


def one_line(text: str) -> str:
    """`clean` text folded onto one line."""
    return " ".join(clean(text).split())
