"""What a tool keeps for one session (a browser) is closed when that session ends.

`Agent.close` ends its session here; a conversation that continues in a new session
(compression: `SessionContinued`) takes its predecessor's things along.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from talaria.events import SessionContinued

log = logging.getLogger("talaria.tools")

_lock = threading.Lock()
_closers: dict[str, list[Callable[[], None]]] = {}
_followers: list[Callable[[str, str], None]] = []


def on_continue(follower: Callable[[str, str], None]) -> None:
    """`follower(previous, new)` hears of every conversation continued in a new session."""
    with _lock:
        _followers.append(follower)


def on_session_end(session: str, closer: Callable[[], None]) -> None:
    with _lock:
        _closers.setdefault(session, []).append(closer)


def end_session(session: str) -> None:
    """Run the session's closers; a failing one is logged, the others still run."""
    with _lock:
        closers = _closers.pop(session, [])
    for closer in closers:
        try:
            closer()
        except Exception as exc:
            log.warning("closing what session %s kept failed: %s", session, exc)


def follow(event: SessionContinued) -> None:
    """A conversation continued in a new session keeps what it had."""
    with _lock:
        moved = _closers.pop(event.previous_id, [])
        _closers.setdefault(event.session_id, []).extend(moved)
        followers = list(_followers)
    for follower in followers:
        follower(event.previous_id, event.session_id)
