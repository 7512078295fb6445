"""A run: one agent turn, its events buffered from the start so any client can (re)connect.

Engine events are mapped to the API's event names as they arrive; every event gets a
sequential id (the SSE `id:`), so `Last-Event-ID` resumes exactly after what a client saw.
The buffer is bounded: past `max_events` the oldest events are dropped (a very late client
then starts from the oldest one kept).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from talaria import events as ev

TERMINAL_EVENTS = ("run.completed", "run.failed", "run.cancelled")


@dataclass(frozen=True, slots=True)
class RunEvent:
    id: int
    name: str
    data: dict[str, Any]


def _resolved(event: ev.RequestResolved) -> tuple[str, dict[str, Any]]:
    key = "decision" if event.kind == "approval" else "answer"
    return f"{event.kind}.resolved", {"request_id": event.request_id, key: event.answer}


def _approval(event: ev.ApprovalRequested) -> tuple[str, dict[str, Any]]:
    data = asdict(event)
    data["choices"] = list(event.choices)
    return "approval.requested", data


def _subagent(event: ev.SubagentEvent) -> tuple[str, dict[str, Any]] | None:
    """A sub-agent's event as the same API event, prefixed `subagent.`, naming it; its turn's
    end is `subagent.finished` with its answer (a sub-agent does not stream)."""
    inner, origin = event.event, asdict(event.origin)
    if isinstance(inner, ev.TurnFinished):
        answer = {"final_response": inner.final_response, "exit_reason": inner.exit_reason}
        return "subagent.finished", {**answer, "subagent": origin}
    mapped = api_event(inner)
    if mapped is None:
        return None
    name, data = mapped
    return f"subagent.{name}", {**data, "subagent": origin}


EVENT_NAMES: dict[type, Callable[[Any], tuple[str, dict[str, Any]] | None]] = {
    ev.TextDelta: lambda e: ("message.delta", {"text": e.text}),
    ev.ReasoningDelta: lambda e: ("reasoning.delta", {"text": e.text}),
    ev.ToolStarted: lambda e: (
        "tool.started",
        {"call_id": e.call_id, "name": e.name, "arguments": e.arguments},
    ),
    ev.ToolFinished: lambda e: (
        "tool.completed",
        {
            "call_id": e.call_id,
            "name": e.name,
            "result": e.result,
            "is_error": e.is_error,
            "duration_s": round(e.duration_s, 4),
        },
    ),
    ev.ApprovalRequested: _approval,
    ev.ClarifyRequested: lambda e: ("clarify.requested", asdict(e)),
    ev.RequestResolved: _resolved,
    ev.RequestWithdrawn: lambda e: ("request.withdrawn", asdict(e)),
    ev.Notice: lambda e: ("notice", {"level": e.level, "message": e.message}),
    ev.SteerAccepted: lambda e: ("steer.accepted", asdict(e)),
    ev.SteerDelivered: lambda e: ("steer.delivered", asdict(e)),
    ev.MessageQueued: lambda e: ("message.queued", asdict(e)),
    ev.QueuedMessageStarted: lambda e: ("queued_message.started", asdict(e)),
    ev.SubagentEvent: _subagent,
}
"""Engine event -> (API event name, data). Events not listed (status, steps) stay internal."""


def api_event(event: ev.Event) -> tuple[str, dict[str, Any]] | None:
    convert = EVENT_NAMES.get(type(event))
    return convert(event) if convert is not None else None


class Run:
    """The events of one turn; publish from any thread, follow from the server's loop."""

    def __init__(
        self, session_id: str, loop: asyncio.AbstractEventLoop, max_events: int = 20_000
    ) -> None:
        self.id = f"run_{uuid.uuid4().hex[:16]}"
        self.session_id = session_id
        self.loop = loop
        self.created_at = time.time()
        self.finished_at: float | None = None
        self.result: dict[str, Any] | None = None
        self.task: asyncio.Task[Any] | None = None
        self._events: deque[RunEvent] = deque(maxlen=max_events)
        self._next_id = 1
        self._changed = asyncio.Event()
        self._lock = threading.Lock()

    @property
    def done(self) -> bool:
        return self.finished_at is not None

    @property
    def status(self) -> str:
        last = self._events[-1].name if self._events else ""
        return last.removeprefix("run.") if last in TERMINAL_EVENTS else "running"

    def on_engine_event(self, event: ev.Event) -> None:
        mapped = api_event(event)
        if mapped is not None:
            self.publish(*mapped)

    def publish(self, name: str, data: dict[str, Any]) -> None:
        """Append an event (thread-safe) and wake the followers on the loop."""
        with self._lock:
            if self.done:
                return
            self._events.append(RunEvent(self._next_id, name, data))
            self._next_id += 1
            if name in TERMINAL_EVENTS:
                self.finished_at = time.time()
        self._wake()

    def _wake(self) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self._signal()
        elif not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._signal)

    def _signal(self) -> None:
        """Each follower waits on the Event it saw before reading, so none misses a wake."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def events_after(self, last_id: int) -> list[RunEvent]:
        with self._lock:
            return [event for event in self._events if event.id > last_id]

    async def follow(
        self, last_id: int = 0, keepalive: float | None = None
    ) -> AsyncIterator[RunEvent | None]:
        """Every event after `last_id`, then each new one as it comes, until the run ends;
        None after `keepalive` quiet seconds (a stream sends a ping so proxies keep it open)."""
        while True:
            changed = self._changed
            for event in self.events_after(last_id):
                last_id = event.id
                yield event
            if self.done and not self.events_after(last_id):
                return
            try:
                await asyncio.wait_for(changed.wait(), keepalive)
            except TimeoutError:
                yield None

    async def wait(self) -> RunEvent:
        """The run's last event, once it has ended."""
        async for _ in self.follow(self._next_id - 1):
            pass
        return self._events[-1]

    def summary(self) -> dict[str, Any]:
        return {
            "run_id": self.id,
            "session_id": self.session_id,
            "status": self.status,
            "created_at": self.created_at,
            "finished_at": self.finished_at,
        }


def terminal_event(result: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The run's last event, from the turn's result dict."""
    data = {
        "final_response": result.get("final_response"),
        "usage": result.get("usage") or {},
        "turn_exit_reason": result.get("turn_exit_reason"),
        "session_id": result.get("session_id"),
    }
    if result.get("interrupted"):
        return "run.cancelled", data
    if result.get("failed"):
        return "run.failed", {**data, "error": result.get("error") or result["turn_exit_reason"]}
    return "run.completed", data
