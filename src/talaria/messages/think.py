"""Separate inline reasoning (``<think>...</think>``) from the visible text of an answer.

Open-weight models served behind OpenAI-compatible endpoints often put their reasoning inline
in tags instead of a separate field. The user must not see it as the answer, and it must not be
lost either: it becomes the message's reasoning. `ThinkSplitter` does this on a stream whose
chunks may cut a tag anywhere; `strip_think` does it on a whole text, with the same result.

Rules: an opening tag is closed only by its own closing tag; an unclosed block runs to the end
of the text (the model hit its output limit while thinking); stray closing tags stay visible.
"""

from __future__ import annotations

import re

TAG_NAMES = ("think", "thinking", "reasoning")
_OPENINGS = {f"<{name}>": name for name in TAG_NAMES}
_BLOCK_RE = re.compile(r"<(think|thinking|reasoning)>(.*?)(?:</\1>|\Z)", re.DOTALL)


def strip_think(text: str) -> tuple[str, str]:
    """Split a whole text into (visible, reasoning)."""
    reasoning = "".join(match.group(2) for match in _BLOCK_RE.finditer(text))
    return _BLOCK_RE.sub("", text), reasoning


class ThinkSplitter:
    """Streaming `strip_think`: feed chunks, get (visible, reasoning) deltas; `flush` at the end.

    Text that might be the start of a tag is held back until the next chunk decides it.
    """

    def __init__(self) -> None:
        self._inside: str | None = None
        self._held = ""

    @property
    def in_reasoning(self) -> bool:
        """True while inside an open reasoning block."""
        return self._inside is not None

    def feed(self, chunk: str) -> tuple[str, str]:
        text = self._held + chunk
        self._held = ""
        visible: list[str] = []
        reasoning: list[str] = []
        while text:
            if self._inside is None:
                start, tag = _first_opening(text)
                if tag is None:
                    keep = _partial_tail(text, tuple(_OPENINGS))
                    visible.append(text[:keep])
                    self._held = text[keep:]
                    break
                visible.append(text[:start])
                self._inside = _OPENINGS[tag]
                text = text[start + len(tag) :]
            else:
                closing = f"</{self._inside}>"
                end = text.find(closing)
                if end < 0:
                    keep = _partial_tail(text, (closing,))
                    reasoning.append(text[:keep])
                    self._held = text[keep:]
                    break
                reasoning.append(text[:end])
                self._inside = None
                text = text[end + len(closing) :]
        return "".join(visible), "".join(reasoning)

    def flush(self) -> tuple[str, str]:
        """Release held-back text: it was not a tag after all (or an unclosed block's tail)."""
        held, self._held = self._held, ""
        return ("", held) if self._inside is not None else (held, "")


def _first_opening(text: str) -> tuple[int, str | None]:
    """Position and text of the earliest opening tag in ``text``."""
    best, found = len(text), None
    for tag in _OPENINGS:
        position = text.find(tag, 0, best + len(tag))
        if 0 <= position < best:
            best, found = position, tag
    return best, found


def _partial_tail(text: str, tags: tuple[str, ...]) -> int:
    """Where a suffix of ``text`` that could still grow into one of ``tags`` begins."""
    longest = max(len(tag) for tag in tags)
    start = text.find("<", max(0, len(text) - longest + 1))
    while start >= 0:
        tail = text[start:]
        if any(tag.startswith(tail) for tag in tags):
            return start
        start = text.find("<", start + 1)
    return len(text)
