"""Activity plumbing: heartbeats while a call runs, and the model's stream forwarded to the
workflow as it arrives."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from temporalio import activity

from talaria.durable.protocol import event_to_dict
from talaria.events import Event, ReasoningDelta, TextDelta, ToolCallGenerated

log = logging.getLogger("talaria.durable")


class DeltaForwarder:
    """A StreamHandler that sends the stream's deltas to the workflow in small batches (each
    batch is a signal: one history event and one workflow task)."""

    def __init__(self, workflow_id: str, enabled: bool, separator: str = "") -> None:
        self.workflow_id = workflow_id
        self.enabled = enabled
        self.separator = separator
        """Sent before the first text, as `loop.stream.EventStream` does in process."""
        self.buffer: list[dict[str, Any]] = []

    def _add(self, event: Event) -> None:
        if self.enabled:
            self.buffer.append(event_to_dict(event))

    def note(self, event: Event) -> None:
        """An event the turn's followers see even when deltas are off (a notice)."""
        self.buffer.append(event_to_dict(event))

    def text(self, delta: str) -> None:
        if delta:
            if self.separator:
                self._add(TextDelta(self.separator))
                self.separator = ""
            self._add(TextDelta(delta))

    def reasoning(self, delta: str) -> None:
        if delta:
            self._add(ReasoningDelta(delta))

    def tool_call(self, index: int, call_id: str, name: str) -> None:
        self._add(ToolCallGenerated(index, call_id, name))

    def tool_arguments(self, index: int, delta: str) -> None:
        pass

    async def flush(self) -> None:
        if not self.buffer:
            return
        batch, self.buffer = self.buffer, []
        try:
            await activity.client().get_workflow_handle(self.workflow_id).signal("stream", batch)
        except Exception:  # the deltas are a courtesy; the answer itself is the result
            log.debug("could not forward %d deltas", len(batch), exc_info=True)


@asynccontextmanager
async def heartbeating(
    flush: Callable[[], Awaitable[None]] | None = None,
) -> AsyncIterator[None]:
    """Heartbeat (and forward deltas) while the body runs, so Temporal can tell a slow call
    from a dead worker."""
    timeout = activity.info().heartbeat_timeout
    interval = min(0.25, timeout.total_seconds() / 4) if timeout else 0.25

    async def beat() -> None:
        while True:
            activity.heartbeat()
            if flush is not None:
                await flush()
            await asyncio.sleep(interval)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        if flush is not None:
            await flush()
