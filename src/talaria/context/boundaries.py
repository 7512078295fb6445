"""Where a compression may cut the history: a pure function, so it can be property-tested.

The compressor replaces ``history[start:end]`` with one summary message. A cut is safe when
the spliced history stays provider-valid:

* a tool result is never separated from the assistant message that called it, so neither
  ``history[start]`` nor ``history[end]`` may be a tool result;
* no two user or two assistant messages end up in a row. The summary's role is therefore the
  opposite of the first kept message after it (`summary_role`), and the message before the
  window must not have that same role.

The head (the first ``protect_head`` messages: the user's original request) and the tail (the
last ``protect_last_n`` messages) are never summarised, nor is the latest user message: it is
what the model is answering right now. With a head of 0 the summary may open the history; it
is then a user message, so the first kept message must be an assistant one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from talaria.core import Message

MIN_WINDOW = 2
"""Summarising fewer messages than this cannot shrink anything."""

_OPPOSITE: dict[str, Literal["user", "assistant"]] = {"user": "assistant", "assistant": "user"}


def summary_role(history: Sequence[Message], end: int) -> Literal["user", "assistant"]:
    """The role a summary replacing ``history[start:end]`` takes: whatever alternates with the
    first kept message after it."""
    return _OPPOSITE.get(_role(history, end), "user")


def choose_compression_window(
    history: Sequence[Message],
    protect_head: int,
    protect_last_n: int,
    min_size: int = MIN_WINDOW,
    keep_latest_user: bool = True,
) -> tuple[int, int] | None:
    """The ``[start, end)`` slice to summarise, or None when nothing is worth compressing.

    Among the safe cuts it keeps the head as short as possible, then summarises as much as
    possible (the largest ``end``). A small window may summarise a single (large) message
    with ``min_size=1``; between turns (a manual compression) the latest user message is
    answered already and may go too (``keep_latest_user=False``).
    """
    count = len(history)
    tail_start = count - max(protect_last_n, 0)
    latest_user = max((i for i, m in enumerate(history) if m.get("role") == "user"), default=-1)
    ends = _EndFinder(history)
    for start in range(max(protect_head, 0), tail_start):
        if _role(history, start) == "tool":
            continue
        answering = keep_latest_user and start <= latest_user
        limit = min(tail_start, latest_user) if answering else tail_start
        end = ends.last_end(_needed_next_roles(_role(history, start - 1)), limit)
        if end is not None and end - start >= min_size:
            return start, end
    return None


def _needed_next_roles(previous: str) -> tuple[str, ...]:
    """Roles the first kept message may have, given the role just before the window."""
    if previous == "user":
        return ("user",)  # the summary is an assistant message
    if previous == "assistant":
        return ("assistant",)  # the summary is a user message
    if previous == "":
        return ("assistant",)  # the summary opens the history, so it is a user message
    return ("user", "assistant")


class _EndFinder:
    """The largest index at or below a limit holding a message of given roles (memoised: the
    search asks the same few questions for every candidate start)."""

    def __init__(self, history: Sequence[Message]) -> None:
        self.history = history
        self.cache: dict[tuple[tuple[str, ...], int], int | None] = {}

    def last_end(self, roles: tuple[str, ...], limit: int) -> int | None:
        key = (roles, limit)
        if key not in self.cache:
            self.cache[key] = next(
                (i for i in range(limit, -1, -1) if _role(self.history, i) in roles), None
            )
        return self.cache[key]


def _role(history: Sequence[Message], index: int) -> str:
    if 0 <= index < len(history):
        return str(history[index].get("role"))
    return ""
