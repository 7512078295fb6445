"""The moment a model request is on its way, for work that must not delay it.

The loop sets a callback around a model call (`when_sent`); the transport calls it once the
request is written (`request_sent`; through httpx2, once the answer's head is in). An agent
starts the turn's first snapshot of the files there: before that, its git and its imports
would compete with building and sending the request on a process's first turn; after it,
they overlap with the model's work. A client that never calls it (one of the user's own)
loses nothing: the snapshot then starts when it is first needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_on_sent: ContextVar[Callable[[], None] | None] = ContextVar("talaria_on_sent", default=None)


@contextmanager
def when_sent(callback: Callable[[], None] | None) -> Iterator[None]:
    """Within this block (and the tasks it starts), `request_sent` calls `callback`."""
    token = _on_sent.set(callback)
    try:
        yield
    finally:
        _on_sent.reset(token)


def request_sent() -> None:
    """A model request is on its way: tell whoever asked (it may be called more than once)."""
    callback = _on_sent.get()
    if callback is not None:
        callback()
