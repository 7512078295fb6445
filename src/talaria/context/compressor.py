"""The default context engine: lossy compression into a summary.

Past ``compression.threshold`` of the model's window (the loop's driver decides when), the middle
of the conversation is summarised by the ``compression`` auxiliary model. The head (the user's
original request) and the last ``compression.protect_last_n`` messages stay verbatim; the
summary carries the agent's task list. When no summary can be had, old tool outputs are trimmed
instead. The driver continues the compressed history in a child session (loop/context.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from talaria.context.boundaries import choose_compression_window, summary_role
from talaria.context.engine import Budget, CompressionFailed, ContextEngine, Summarise
from talaria.context.summary import (
    clean_summary,
    find_summary,
    is_summary,
    summary_message,
    summary_request,
    summary_text,
    trim_tool_outputs,
)
from talaria.context.tokens import estimate_tokens

if TYPE_CHECKING:
    from talaria.config import Config
    from talaria.core import Message

HEAD = 1
"""Messages kept before the summary on the first compression: the user's first request."""
SMALL_WINDOW = 16_384
"""Below this many tokens compression may keep less than configured (see `_cut`)."""
SQUEEZE_TAILS = (8, 4, 2, 0)
"""Shorter protected tails tried, in order, when the configured one leaves nothing to cut."""


class Compressor(ContextEngine):
    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.protect_last_n = int(config.compression.protect_last_n)

    async def process(
        self, history: list[Message], budget: Budget, summarise: Summarise
    ) -> list[Message]:
        """The middle summarised (or its old tool outputs trimmed). After an overflow, on a
        small window, or on `/compress` past the threshold, the protected head and tail shrink
        as far as needed to make room; `/compress` may summarise the answered last request."""
        window = self._cut(history, _need(budget), between_turns=budget.trigger == "manual")
        if window is None:
            return history  # not final: the window may open as the turn adds messages
        start, end = window
        summary = await self._summarise(history[start:end], budget, summarise)
        if summary:
            message = summary_message(summary, summary_role(history, end), budget.keep)
            return [*history[:start], message, *history[end:]]
        trimmed, count = trim_tool_outputs(history, start, end)
        if count == 0:
            raise CompressionFailed(
                "compression failed: no summary could be written and there is no "
                "old tool output to trim"
            )
        return trimmed

    def describe(self, before: list[Message], after: list[Message]) -> str:
        if find_summary(after) is None:
            count = sum(1 for old, new in zip(before, after, strict=False) if old != new)
            return f"no summary could be written; trimmed {count} old tool outputs instead"
        gone = sum(not is_summary(m) for m in before) - sum(not is_summary(m) for m in after)
        return f"compressed {gone} messages into a summary"

    def _cut(
        self, history: list[Message], need: int | None, between_turns: bool = False
    ) -> tuple[int, int] | None:
        """What to summarise: the configured head and tail kept. Squeezing (`need` = tokens
        that must go) tries shorter tails, then no head, and takes the first cut that frees
        enough, else the one that frees most (down to a single large message)."""
        previous = find_summary(history)
        head = previous if previous is not None else HEAD
        window = choose_compression_window(history, head, self.protect_last_n)
        if need is None or (window is not None and _tokens(history, window) >= need):
            return window
        best, freed = window, _tokens(history, window) if window else 0
        for protect_head in dict.fromkeys((head, 0)):
            for tail in (n for n in SQUEEZE_TAILS if n < self.protect_last_n):
                cut = choose_compression_window(
                    history, protect_head, tail, min_size=1, keep_latest_user=not between_turns
                )
                gain = _tokens(history, cut) if cut else 0
                if cut is not None and gain >= need:
                    return cut
                if gain > freed:
                    best, freed = cut, gain
        return best

    @staticmethod
    async def _summarise(window: list[Message], budget: Budget, summarise: Summarise) -> str:
        """The summariser's answer, or "" when it failed (the caller falls back)."""
        previous = summary_text(window[0]) if is_summary(window[0]) else ""
        messages = window[1:] if previous else window
        max_chars = max(min(budget.window * 2, 200_000), 1_000)
        request = summary_request(
            messages, previous=previous, focus=budget.focus, max_chars=max_chars
        )
        summary = clean_summary(await summarise(request))
        # at most about half the window, so that the summary always leaves room to work
        return summary if len(summary) <= max_chars else summary[:max_chars].rstrip() + " […]"


def _need(budget: Budget) -> int | None:
    """Tokens that must go (at least a quarter of the context: after an overflow our
    estimate is known to be low), or None when the configured head and tail may stay."""
    tight = {
        "size": budget.window < SMALL_WINDOW,
        "overflow": True,
        "manual": budget.excess > 0,
    }[budget.trigger]
    return max(budget.excess, budget.estimated // 4) if tight else None


def _tokens(history: list[Message], window: tuple[int, int]) -> int:
    return estimate_tokens(history[window[0] : window[1]])
