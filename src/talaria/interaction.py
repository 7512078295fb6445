"""Questions the engine asks the user, as requests in the event protocol.

An approval or a clarify question is emitted as a request event with an id, waits (without
blocking the event loop) for `respond(request_id, answer)` from any thread or front end, and is
withdrawn with an event of its own when it times out, the turn is interrupted or the turn ends,
so every front end can clear its prompt. Several requests may be pending at once; each is
emitted the moment it is asked, so none lapses unseen.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from talaria.events import (
    ApprovalRequested,
    ClarifyRequested,
    EventSink,
    RequestResolved,
    RequestWithdrawn,
    SubagentOrigin,
)

Request = ApprovalRequested | ClarifyRequested
REQUEST_KINDS = ("approval", "clarify")
APPROVAL_DECISIONS = ("once", "session", "always", "deny")


def subagent_name(origin: SubagentOrigin) -> str:
    """How front ends name a sub-agent: its definition's name, else its place in the call."""
    return origin.agent or f"sub-agent {origin.task_index + 1}"


def asked_by(request: Request) -> str:
    """`[name: task] ` when a sub-agent asks (the task cut to 60 characters), else ''."""
    origin = request.subagent
    if origin is None:
        return ""
    task = " ".join(origin.task.split())
    return f"[{subagent_name(origin)}: {task[:60]}{'…' if len(task) > 60 else ''}] "


class RequestLapsed(Exception):
    """The request was withdrawn before anyone answered it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(slots=True)
class _Pending:
    """An open request and where its answer must be delivered."""

    request: Request
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[str]


def normalise_answer(kind: str, answer: object) -> str:
    """The answer as the engine reads it; ValueError for an approval that is not a decision
    (a front end should say so rather than deny silently)."""
    if kind == "approval":
        if isinstance(answer, bool):
            return "once" if answer else "deny"
        text = str(answer).strip().lower() if answer is not None else ""
        if text not in APPROVAL_DECISIONS:
            raise ValueError(
                f"approval answer must be one of {', '.join(APPROVAL_DECISIONS)}, got {answer!r}"
            )
        return text
    return "" if answer is None else str(answer)


class Interactions:
    """The pending requests of one agent, and who can answer which kind."""

    def __init__(self, emit: EventSink) -> None:
        self._emit = emit
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        self._responders: Counter[str] = Counter()

    # ---- who answers --------------------------------------------------------------------

    def add_responder(self, kinds: Iterable[str]) -> Callable[[], None]:
        """Declare that a front end answers these kinds; returns the undo."""
        kinds = tuple(kinds)
        unknown = set(kinds) - set(REQUEST_KINDS)
        if unknown:
            raise ValueError(f"unknown request kind(s) {sorted(unknown)}; known: {REQUEST_KINDS}")
        with self._lock:
            self._responders.update(kinds)

        def remove() -> None:
            with self._lock:
                self._responders.subtract(kinds)

        return remove

    def can_answer(self, kind: str) -> bool:
        with self._lock:
            return self._responders[kind] > 0

    # ---- asking ---------------------------------------------------------------------------

    async def ask(self, make_request: Callable[[str], Request], timeout: float | None) -> str:
        """Emit the request and wait for its answer; RequestLapsed on timeout (and on
        interrupt, via cancellation, after withdrawing it)."""
        request = make_request(f"req_{os.urandom(6).hex()}")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        with self._lock:
            self._pending[request.request_id] = _Pending(request, loop, future)
        self._emit(request)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            if self._withdraw(request.request_id, "timeout"):
                raise RequestLapsed("timeout") from None
            return await future  # answered in the same instant: the answer wins
        except asyncio.CancelledError:
            self._withdraw(request.request_id, "interrupted")
            raise

    def respond(self, request_id: str, answer: object) -> bool:
        """Answer a pending request (thread-safe). False when it is not pending (answered,
        withdrawn or unknown); ValueError when the answer does not fit the request."""
        with self._lock:
            pending = self._pending.get(request_id)
            if pending is None:
                return False
            value = normalise_answer(pending.request.kind, answer)
            del self._pending[request_id]
        resolved = RequestResolved(request_id, pending.request.kind, value)
        _on_loop(pending.loop, lambda: _settle(pending.future, value, resolved, self._emit))
        return True

    def pending(self) -> list[Request]:
        with self._lock:
            return [entry.request for entry in self._pending.values()]

    def withdraw_all(self, reason: str) -> None:
        for request in self.pending():
            self._withdraw(request.request_id, reason)

    def for_subagent(self, origin: SubagentOrigin, *, answered: bool = True) -> Interactions:
        """The requests of a sub-agent: asked here (so this agent's front ends show them,
        naming `origin`, and its `respond` answers them), withdrawn with the sub-agent's turn.
        `answered=False`: nobody is asked, so the headless rule denies its approvals."""
        return SubagentInteractions(self, origin, answered)

    def _withdraw(self, request_id: str, reason: str) -> bool:
        with self._lock:
            pending = self._pending.pop(request_id, None)
        if pending is None:
            return False
        if not pending.future.done():
            pending.future.set_exception(RequestLapsed(reason))
            pending.future.exception()  # retrieved: an unawaited lapse is not an error
        self._emit(RequestWithdrawn(request_id, pending.request.kind, reason))
        return True


class SubagentInteractions(Interactions):
    """A sub-agent's view of its parent's requests (`Interactions.for_subagent`)."""

    def __init__(self, parent: Interactions, origin: SubagentOrigin, answered: bool) -> None:
        super().__init__(parent._emit)
        self._parent = parent
        self._origin = origin
        self._answered = answered
        self._asked: set[str] = set()

    def add_responder(self, kinds: Iterable[str]) -> Callable[[], None]:
        return self._parent.add_responder(kinds)

    def can_answer(self, kind: str) -> bool:
        return self._answered and self._parent.can_answer(kind)

    async def ask(self, make_request: Callable[[str], Request], timeout: float | None) -> str:
        def tagged(request_id: str) -> Request:
            with self._lock:
                self._asked.add(request_id)
            return dataclasses.replace(make_request(request_id), subagent=self._origin)

        return await self._parent.ask(tagged, timeout)

    def respond(self, request_id: str, answer: object) -> bool:
        return self._parent.respond(request_id, answer)

    def pending(self) -> list[Request]:
        with self._lock:
            asked = set(self._asked)
        return [request for request in self._parent.pending() if request.request_id in asked]

    def _withdraw(self, request_id: str, reason: str) -> bool:
        return self._parent._withdraw(request_id, reason)


def _on_loop(loop: asyncio.AbstractEventLoop, work: Callable[[], None]) -> None:
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        work()
    elif not loop.is_closed():
        loop.call_soon_threadsafe(work)


def _settle(
    future: asyncio.Future[str], value: str, resolved: RequestResolved, emit: EventSink
) -> None:
    if not future.done():
        future.set_result(value)
    emit(resolved)
