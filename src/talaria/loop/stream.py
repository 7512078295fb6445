"""Turns a provider's streaming output into engine events."""

from __future__ import annotations

from talaria.events import (
    EventSink,
    ReasoningDelta,
    TextDelta,
    ThinkingStopped,
    ToolCallGenerated,
)

STEP_SEPARATOR = "\n\n"
"""Between the texts of a turn's steps, in the stream and in the final answer alike."""


class EventStream:
    """A StreamHandler that emits events and remembers whether anything visible went out.
    `separator` goes out before the call's first text: an earlier step of the turn spoke, and
    its text must not run into this one's ("...the folder.The tool returned...")."""

    def __init__(self, emit: EventSink, iteration: int, separator: str = "") -> None:
        self._emit = emit
        self._iteration = iteration
        self.separator = separator
        self.thinking = True
        self.output_started = False
        self.produced: list[str] = []
        """Text and reasoning streamed so far (an interrupted call's spent output)."""

    def stop_thinking(self) -> None:
        if self.thinking:
            self.thinking = False
            self._emit(ThinkingStopped(self._iteration))

    def text(self, delta: str) -> None:
        if delta:
            self.stop_thinking()
            if not self.output_started and self.separator:
                self._emit(TextDelta(self.separator))
            self.output_started = True
            self.produced.append(delta)
            self._emit(TextDelta(delta))

    def reasoning(self, delta: str) -> None:
        if delta:
            self.produced.append(delta)
            self._emit(ReasoningDelta(delta))

    def tool_call(self, index: int, call_id: str, name: str) -> None:
        self.stop_thinking()
        self._emit(ToolCallGenerated(index, call_id, name))

    def tool_arguments(self, index: int, delta: str) -> None:
        """Arguments are shown when the tool starts, fully parsed; nothing to emit yet."""
