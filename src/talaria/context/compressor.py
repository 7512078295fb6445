"""The default context engine: lossy compression into a summary and a child session.

Before each request the size of the outgoing context is estimated (anchored to the provider's last
real count); past ``compression.threshold`` of the model's window, the middle of the conversation is
summarised by the ``compression`` auxiliary model. The head (the user's original request) and the
last ``compression.protect_last_n`` messages stay verbatim. The compressed history continues in a
new session whose parent is the old one, so the full conversation stays in the store and the prompt
prefix changes only here (stable prefix, docs/architecture.md)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from talaria.context.boundaries import choose_compression_window, summary_role
from talaria.context.engine import ContextEngine
from talaria.context.summary import (
    clean_summary,
    find_summary,
    is_summary,
    summary_message,
    summary_request,
    summary_text,
    trim_tool_outputs,
)
from talaria.context.tokens import ContextTracker, estimate_tokens
from talaria.events import Notice, SessionContinued, StatusChanged
from talaria.offload import run_blocking
from talaria.providers.errors import ProviderError

if TYPE_CHECKING:
    from talaria.config import Config
    from talaria.core import Message, ModelResponse, Usage
    from talaria.core.telemetry import Scope
    from talaria.loop.runtime import Runtime
    from talaria.loop.session import SessionHandle

log = logging.getLogger("talaria.compression")

MAX_PER_TURN = 3
"""Compressions one turn may make before it just carries on (or fails on overflow)."""
MIN_GAIN = 0.10
"""A compression that shrinks the estimate by less than this stops retries for the turn."""
HEAD = 1
"""Messages kept before the summary on the first compression: the user's first request."""
SMALL_WINDOW = 16_384
"""Below this many tokens compression may keep less than configured (see `_squeezed`)."""
SQUEEZE_TAILS = (8, 4, 2, 0)
"""Shorter protected tails tried, in order, when the configured one leaves nothing to cut."""


class Compressor(ContextEngine):
    def __init__(self, config: Config, runtime: Runtime) -> None:
        self.config = config
        self.threshold = float(config.compression.threshold)
        self.protect_last_n = int(config.compression.protect_last_n)
        self.tracker = ContextTracker()
        self._windows: dict[str, int] = {}
        self._turn: object = None
        self._count = 0
        self._stalled = False
        self._window_told: set[str] = set()
        """Models whose window is known, or is a guess the user was told about."""

    # ---- the ContextEngine contract ------------------------------------------------------

    def record_usage(self, usage: Usage, message_count: int) -> None:
        self.tracker.record_usage(usage.prompt_tokens, message_count)

    async def before_request(self, rt: Runtime, session: SessionHandle, state: Any) -> None:
        self._start_turn(state)
        if self._stalled or self._count >= MAX_PER_TURN:
            return
        window = await self.window(rt)
        if self._estimate(rt, session) > self.threshold * window:
            self._warn_if_guessed(rt)
            need = self._need(rt, session, window) if window < SMALL_WINDOW else None
            await self._compress(rt, session, None, need)

    async def compress(
        self, rt: Runtime, session: SessionHandle, state: Any, focus: str | None = None
    ) -> bool:
        """Compress now (`/compress`, or a context-overflow error); False when nothing changed:
        no safe window, the per-turn cap, or a failed summary with nothing to trim instead.
        When the context is over the threshold (or overflowed) the protected head and tail
        shrink as far as needed to make room."""
        self._start_turn(state)
        if self._stalled or self._count >= MAX_PER_TURN:
            return False
        if state is not None:
            self._warn_if_guessed(rt)
        window = await self.window(rt)
        tight = state is not None or self._estimate(rt, session) > self.threshold * window
        need = self._need(rt, session, window) if tight else None
        return await self._compress(rt, session, focus, need, between_turns=state is None)

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

    def _need(self, rt: Runtime, session: SessionHandle, window: int) -> int:
        """Tokens to free to get back under the threshold (at least a quarter of the context:
        after an overflow our estimate is known to be low)."""
        estimate = self._estimate(rt, session)
        return max(int(estimate - self.threshold * window), estimate // 4)

    async def _compress(
        self,
        rt: Runtime,
        session: SessionHandle,
        focus: str | None,
        need: int | None = None,
        *,
        between_turns: bool = False,
    ) -> bool:
        if rt.hooks.has("pre_compact"):
            trigger = "manual" if focus is not None else "auto"
            await rt.hooks.aemit("pre_compact", trigger=trigger, session_id=session.id)
        with rt.telemetry.compression(session.id) as observed:
            return await self._compress_observed(rt, session, focus, observed, need, between_turns)

    async def _compress_observed(
        self,
        rt: Runtime,
        session: SessionHandle,
        focus: str | None,
        observed: Scope,
        need: int | None,
        between_turns: bool,
    ) -> bool:
        await self._save_first(rt, session)
        history = session.history
        window = self._cut(history, need, between_turns)
        if window is None:
            return False  # not final: the window may open as the turn adds messages
        rt.emit(StatusChanged("compressing"))
        compressed, note = await self._compressed(rt, history, window, focus)
        if compressed is None:
            self._stalled = True
            rt.emit(Notice("warning", note))
            return False
        before = estimate_tokens([*_system(session), *history], rt.tool_schemas)
        after = estimate_tokens([*_system(session), *compressed], rt.tool_schemas)
        previous_id = session.id
        new_id = await self._continue_in_child(rt, session, compressed)
        session.id = new_id
        session.history = compressed
        session.next_seq = len(compressed)
        session.unsaved = 0
        rt.emit(SessionContinued(previous_id, new_id))
        self._count += 1
        self.tracker.reset()
        if after > before * (1 - MIN_GAIN):
            self._stalled = True
        log.info(
            "compressed %d -> %d messages (~%d -> ~%d tokens), session %s",
            len(history),
            len(compressed),
            before,
            after,
            new_id,
        )
        rt.emit(Notice("info", f"{note}; continuing in session {new_id}"))
        observed.compressed(len(history), len(compressed), new_id)
        return True

    # ---- sizes ---------------------------------------------------------------------------

    async def window(self, rt: Runtime, *, interruptible: bool = True) -> int:
        """The active model's context window in tokens (looked up once per model)."""
        entry = rt.caller.chain.active
        key = entry.label
        if key not in self._windows:
            from talaria.providers.profiles.context_windows import context_window

            configured = self.config.get("model.context_length")
            metadata = None if configured else await self._endpoint_window(rt, interruptible)
            size, source = context_window(
                entry.model, configured=configured, endpoint_metadata=metadata
            )
            log.info("context window of %s: %d tokens (%s)", key, size, source)
            self._windows[key] = int(size)
            if source != "default":
                self._window_told.add(key)  # known: nothing to warn about
        return self._windows[key]

    def _warn_if_guessed(self, rt: Runtime) -> None:
        """Say once per model that its window is a guess, and only when a decision depends
        on it (a compression, an overflow), not on every start."""
        key = rt.caller.chain.active.label
        if key in self._windows and key not in self._window_told:
            self._window_told.add(key)
            rt.emit(
                Notice(
                    "warning",
                    f"the context window of {key} is unknown; assuming {self._windows[key]} "
                    "tokens (set model.context_length)",
                )
            )

    async def _endpoint_window(self, rt: Runtime, interruptible: bool) -> int | None:
        """Ask the endpoint when our table cannot be trusted for it: local servers run models
        with whatever window they were started with, and unknown models are not in the table."""
        from talaria.providers.profiles.context_windows import (
            fetch_endpoint_context_length,
            table_context_window,
        )
        from talaria.providers.resolve import is_loopback

        spec = rt.caller.chain.active.spec
        if spec is None:
            return None
        local = is_loopback(spec.base_url)
        if not local and (
            spec.api_mode == "anthropic_messages" or table_context_window(spec.model)
        ):
            return None
        probe = fetch_endpoint_context_length(
            spec.base_url, spec.api_key, spec.model, spec.api_mode
        )
        return await (rt.interrupt.race(probe) if interruptible else probe)

    async def fill(self, rt: Runtime, session: SessionHandle) -> float | None:
        window = await self.window(rt, interruptible=False)
        return self._estimate(rt, session) / window if window else None

    def _estimate(self, rt: Runtime, session: SessionHandle) -> int:
        return int(self.tracker.estimate([*_system(session), *session.history], rt.tool_schemas))

    # ---- the steps of a compression --------------------------------------------------------

    def _start_turn(self, state: Any) -> None:
        """The caps are per turn; a new turn is a new state object (None: a manual /compress
        between turns, which always gets a fresh try)."""
        if state is None or state is not self._turn:
            self._turn = state
            self._count = 0
            self._stalled = False

    @staticmethod
    async def _save_first(rt: Runtime, session: SessionHandle) -> None:
        """Nothing may be lost: the session's messages reach the store before the history is
        rewritten (what else the session holds follows `SessionContinued`)."""
        await session.flush()

    async def _compressed(
        self, rt: Runtime, history: list[Message], window: tuple[int, int], focus: str | None
    ) -> tuple[list[Message] | None, str]:
        """The new history and a note for the user; None when nothing could be done."""
        start, end = window
        summary = await self._summarise(rt, history[start:end], focus)
        if summary:
            todos = _todos(rt)
            message = summary_message(summary, summary_role(history, end), todos)
            count = end - start - (1 if is_summary(history[start]) else 0)
            return [*history[:start], message, *history[end:]], (
                f"compressed {count} messages into a summary"
            )
        trimmed, count = trim_tool_outputs(history, start, end)
        if count == 0:
            return None, (
                "compression failed: no summary could be written and there is no "
                "old tool output to trim"
            )
        return trimmed, f"no summary could be written; trimmed {count} old tool outputs instead"

    async def _summarise(self, rt: Runtime, window: list[Message], focus: str | None) -> str:
        """The summariser's answer, or "" when it failed (the caller falls back)."""
        previous = summary_text(window[0]) if is_summary(window[0]) else ""
        messages = window[1:] if previous else window
        max_chars = max(min(await self.window(rt) * 2, 200_000), 1_000)
        request = summary_request(messages, previous=previous, focus=focus, max_chars=max_chars)
        try:
            response = await self._summary_call(rt, request)
        except ProviderError as error:
            log.warning("the compression summary failed: %s", error)
            return ""
        summary = clean_summary(response.text)
        # at most about half the window, so that the summary always leaves room to work
        return summary if len(summary) <= max_chars else summary[:max_chars].rstrip() + " […]"

    async def _summary_call(self, rt: Runtime, request: list[Message]) -> ModelResponse:
        """The summary request on the `compression` auxiliary model (a durable turn asks a
        worker instead)."""
        from talaria.loop.auxiliary import side_call

        return await side_call(rt, "compression", request)

    async def _continue_in_child(
        self, rt: Runtime, session: SessionHandle, history: list[Message]
    ) -> str:
        """Start the child session holding the compressed history (one store transaction,
        with the state the session carries over) and return its id; the caller swaps it into
        the live handle, which the loop and the agent keep using."""
        from talaria.loop.session import new_session_id

        new_id = new_session_id()
        if session.store is not None:
            active = rt.caller.chain.active
            state = rt.services.carried_state() if rt.services is not None else {}
            await run_blocking(
                session.store.continue_in_child,
                session.id,
                new_id,
                history,
                model=active.model,
                provider=active.provider,
                api_mode=active.api_mode,
                system_prompt=session.system_prompt,
                state=state,
                writer=session.writer,
            )
        return new_id


def _tokens(history: list[Message], window: tuple[int, int]) -> int:
    return estimate_tokens(history[window[0] : window[1]])


def _system(session: SessionHandle) -> list[Message]:
    return [{"role": "system", "content": session.system_prompt}] if session.system_prompt else []


def _todos(rt: Runtime) -> str:
    return rt.services.todos.render() if rt.services is not None else ""
