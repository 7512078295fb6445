"""Streamed markdown cut into blocks the chat can render on their own."""

from __future__ import annotations


class MarkdownBlocks:
    """Cuts streamed markdown into blocks that can be rendered on their own.

    A block ends at a blank line outside a code fence, or at the fence that closes a code block;
    rendering whole blocks keeps lists, tables and code intact while the answer streams.
    """

    def __init__(self) -> None:
        self._done: list[str] = []
        self._partial = ""
        self._fence: str | None = None

    def feed(self, text: str) -> list[str]:
        self._partial += text
        blocks: list[str] = []
        while "\n" in self._partial:
            line, self._partial = self._partial.split("\n", 1)
            blocks.extend(self._line(line))
        return blocks

    def _line(self, line: str) -> list[str]:
        marker = line.strip()[:3]
        if self._fence is None and marker in ("```", "~~~"):
            complete = self._cut()
            self._fence = marker
            self._done.append(line)
            return complete
        self._done.append(line)
        if self._fence is not None:
            if marker == self._fence and len(self._done) > 1:
                self._fence = None
                return self._cut()
            return []
        return self._cut() if not line.strip() else []

    def _cut(self) -> list[str]:
        block = "\n".join(self._done).strip("\n")
        self._done = []
        return [block] if block.strip() else []

    @property
    def partial_line(self) -> str:
        return self._partial

    def rest(self) -> str:
        """Everything not yet returned (the end of the answer)."""
        if self._partial:
            self._done.append(self._partial)
            self._partial = ""
        self._fence = None
        cut = self._cut()
        return cut[0] if cut else ""
