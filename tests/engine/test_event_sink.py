"""The agent's event sink: a listener subscribed to one kind of event hears only that kind,
and a listener that raises costs the others nothing."""

from __future__ import annotations

from talaria.callbacks import CallbackSink
from talaria.events import Event, Notice, SessionContinued, TextDelta


def test_a_subscriber_hears_its_kind_of_event_only() -> None:
    sink = CallbackSink({})
    heard: list[SessionContinued] = []
    sink.subscribe(SessionContinued, heard.append)

    sink(TextDelta("hello"))
    sink(SessionContinued("before", "after"))
    sink(Notice("info", "x"))

    assert heard == [SessionContinued("before", "after")]


def test_a_failing_listener_does_not_keep_the_event_from_the_others() -> None:
    def broken(event: object) -> None:
        raise RuntimeError("a UI bug")

    everything: list[Event] = []
    continued: list[SessionContinued] = []
    sink = CallbackSink({"event_callback": broken})
    sink.listeners += [broken, everything.append]
    sink.subscribe(SessionContinued, broken)
    sink.subscribe(SessionContinued, continued.append)

    sink(SessionContinued("before", "after"))

    assert everything == [SessionContinued("before", "after")]
    assert continued == everything
