"""The callbacks of the agent's constructor, as adapters over engine events.

`stream_delta_callback(delta)` and `reasoning_callback(text)` get plain strings; the others get
the event object itself. A callback that raises is logged and ignored: a UI bug must not end a
turn. `event_callback` receives every event. They are for library users: talaria's own front
ends read `agent.events()` (tests/architecture/test_event_stream.py).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from talaria import events as ev
from talaria.interaction import Interactions
from talaria.offload import start_daemon

if TYPE_CHECKING:
    from talaria.core import Approver

log = logging.getLogger("talaria.callbacks")

E = TypeVar("E", bound=ev.Event)

CALLBACK_NAMES = (
    "tool_progress_callback",
    "thinking_callback",
    "reasoning_callback",
    "clarify_callback",
    "step_callback",
    "stream_delta_callback",
    "tool_gen_callback",
    "status_callback",
    "approval_callback",
    "event_callback",
)

_ROUTES: dict[type, tuple[str, Callable[[Any], Any]]] = {
    ev.TextDelta: ("stream_delta_callback", lambda e: e.text),
    ev.ReasoningDelta: ("reasoning_callback", lambda e: e.text),
    ev.ToolCallGenerated: ("tool_gen_callback", lambda e: e),
    ev.ToolStarted: ("tool_progress_callback", lambda e: e),
    ev.ToolFinished: ("tool_progress_callback", lambda e: e),
    ev.ThinkingStarted: ("thinking_callback", lambda e: e),
    ev.ThinkingStopped: ("thinking_callback", lambda e: e),
    ev.StepFinished: ("step_callback", lambda e: e),
    ev.StatusChanged: ("status_callback", lambda e: e),
}


class CallbackSink:
    """An EventSink that fans events out to the user's callbacks."""

    def __init__(self, callbacks: dict[str, Callable[..., Any] | None]) -> None:
        unknown = set(callbacks) - set(CALLBACK_NAMES)
        if unknown:
            raise TypeError(
                f"unknown callback(s): {', '.join(sorted(unknown))}; "
                f"known: {', '.join(CALLBACK_NAMES)}"
            )
        self.callbacks = {name: fn for name, fn in callbacks.items() if fn is not None}
        self.listeners: list[Callable[[ev.Event], None]] = []
        """Hear every event."""
        self._subscribers: dict[type, list[Callable[[Any], None]]] = {}

    def subscribe(self, kind: type[E], listener: Callable[[E], None]) -> None:
        """`listener` hears the events of type `kind` only (a dict lookup per event, not a
        call per listener: the sink sees several events per step)."""
        self._subscribers.setdefault(kind, []).append(listener)

    def __call__(self, event: ev.Event) -> None:
        route = _ROUTES.get(type(event))
        if route is not None:
            name, project = route
            self._safe(name, project(event))
        self._safe("event_callback", event)
        _tell(self.listeners, event)
        subscribers = self._subscribers.get(type(event))
        if subscribers:
            _tell(subscribers, event)

    def _safe(self, name: str, payload: Any) -> None:
        callback = self.callbacks.get(name)
        if callback is None:
            return
        try:
            callback(payload)
        except Exception:
            log.exception("%s raised; ignored", name)


def _tell(listeners: list[Callable[[Any], None]], event: ev.Event) -> None:
    for listener in listeners:
        try:
            listener(event)
        except Exception:
            log.exception("event listener failed; ignored")


def answer_with_callbacks(
    sink: CallbackSink, interactions: Interactions, callbacks: dict[str, Any]
) -> None:
    """`approval_callback(request)` and `clarify_callback(question, choices)` as responders:
    each request is handed to its callback on a thread of its own (a user may take minutes)
    and the callback's return value becomes the answer. A callback that raises denies."""
    approve: Approver | None = callbacks.get("approval_callback")
    clarify = callbacks.get("clarify_callback")
    kinds = [kind for kind, fn in (("approval", approve), ("clarify", clarify)) if fn]
    if not kinds:
        return
    interactions.add_responder(kinds)

    def on_event(event: ev.Event) -> None:
        if isinstance(event, ev.ApprovalRequested) and approve is not None:
            ask: Callable[[], Any] = functools.partial(approve, event)
            fallback: str = "deny"
        elif isinstance(event, ev.ClarifyRequested) and clarify is not None:
            ask = functools.partial(clarify, event.question, event.choices)
            fallback = ""
        else:
            return
        start_daemon(
            functools.partial(_answer, interactions, event.request_id, ask, fallback),
            f"talaria-{event.kind}",
        )

    sink.listeners.append(on_event)


def _answer(
    interactions: Interactions, request_id: str, ask: Callable[[], Any], fallback: str
) -> None:
    try:
        answer = ask()
    except Exception:
        log.exception("request callback raised; answering %r", fallback)
        answer = fallback
    try:
        interactions.respond(request_id, answer)
    except ValueError:
        log.warning("callback answered %r, which is not a valid answer; denying", answer)
        interactions.respond(request_id, fallback)
