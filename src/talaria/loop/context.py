"""The loop's side of the context engine: when to ask it, and what follows its answer.

Before each request the size of the outgoing context is estimated (anchored to the provider's
last real count) against the model's window (looked up once per model). Past
``compression.threshold``, after a context-overflow error, or on `/compress`, the
``pre_compact`` hooks run and the engine (`ContextEngine.process`, a history processor) is
asked for a smaller history. A changed history continues in a new session whose parent is the
old one, so the full conversation stays in the store and the prompt prefix changes only here
(stable prefix, docs/architecture.md); one `SessionContinued` event tells whoever keeps
something per session (the agent's tools, the background processes, the session's closers).
"""

from __future__ import annotations

import logging
import warnings
from typing import TYPE_CHECKING, Any, Protocol

from talaria.config_schema import ConfigError
from talaria.context.engine import (
    Budget,
    CompressionFailed,
    ContextEngine,
    Summarise,
    Trigger,
    engine_class,
)
from talaria.context.tokens import ContextTracker, estimate_tokens
from talaria.events import Notice, SessionContinued, StatusChanged
from talaria.offload import run_blocking
from talaria.providers.errors import ProviderError

if TYPE_CHECKING:
    from talaria.config import Config
    from talaria.core import Message, ModelResponse, Usage
    from talaria.loop.runtime import Runtime
    from talaria.loop.session import SessionHandle

log = logging.getLogger("talaria.compression")

MAX_PER_TURN = 3
"""Compressions one turn may make before it just carries on (or fails on overflow)."""
MIN_GAIN = 0.10
"""A compression that shrinks the estimate by less than this stops retries for the turn."""


class LoopContext(Protocol):
    """What the loop and the agent ask of the context, whichever engine runs behind it."""

    async def before_request(self, rt: Runtime, session: SessionHandle, state: object) -> None:
        """Shrink the history if it is too large for the next request."""

    def record_usage(self, usage: Usage, message_count: int) -> None:
        """The provider's real count for the context it just saw (anchors the estimate)."""

    async def compress(
        self, rt: Runtime, session: SessionHandle, state: object, focus: str | None = None
    ) -> bool:
        """Shrink now: after an overflow (`state`: the turn's) or on `/compress` (None,
        between turns). False when nothing changed."""
        ...

    async def fill(self, rt: Runtime, session: SessionHandle) -> float | None:
        """The share of the window the context takes now (None: unknown); what a front end
        checks between turns (the gateway compresses past `gateway.compress_at`)."""
        ...

    async def window(self, rt: Runtime, *, interruptible: bool = True) -> int | None:
        """The context window in tokens (None: unknown). Not interruptible before a turn
        starts: the lookup is short, and an interrupt then ends the turn."""
        ...


def load_context(config: Config, runtime: Runtime) -> LoopContext | None:
    """The context `context.engine` names, None when compression is off. An engine written
    for the old contract (`before_request(rt, session, state)`) runs as before, with a
    `DeprecationWarning`."""
    found = engine_class(config)
    if found is None:
        return None
    if found.process is not ContextEngine.process:
        return ContextDriver(found(config), config)
    if not hasattr(found, "before_request"):
        raise ConfigError(f"context.engine {found.__name__} defines no process()")
    warnings.warn(
        f"context.engine {found.__name__}: before_request(rt, session, state) is deprecated; "
        "define process(history, budget, summarise) instead (docs/architecture.md)",
        DeprecationWarning,
        stacklevel=2,
    )
    legacy: Any = found  # built as the old contract said: with the runtime
    return LegacyContext(legacy(config, runtime))


class ContextDriver:
    """Runs a `ContextEngine` for the loop: the window, the estimate, the per-turn caps, the
    hooks, the summary call and the hand-over to a child session."""

    def __init__(self, engine: ContextEngine, config: Config) -> None:
        self.engine = engine
        self.config = config
        self.threshold = float(config.compression.threshold)
        self.tracker = ContextTracker()
        self._windows: dict[str, int] = {}
        self._window_told: set[str] = set()
        """Models whose window is known, or is a guess the user was told about."""
        self._turn: object = None
        self._count = 0
        self._stalled = False

    def record_usage(self, usage: Usage, message_count: int) -> None:
        self.tracker.record_usage(usage.prompt_tokens, message_count)

    async def before_request(self, rt: Runtime, session: SessionHandle, state: object) -> None:
        self._start_turn(state)
        if self._stalled or self._count >= MAX_PER_TURN:
            return
        window = await self.window(rt)
        estimated = self._estimate(rt, session)
        if estimated > self.threshold * window:
            self._warn_if_guessed(rt)
            await self._compress(rt, session, self._budget(rt, window, estimated, "size"))

    async def compress(
        self, rt: Runtime, session: SessionHandle, state: object, focus: str | None = None
    ) -> bool:
        """False when nothing changed: no safe cut, the per-turn cap, or a failure."""
        self._start_turn(state)
        if self._stalled or self._count >= MAX_PER_TURN:
            return False
        if state is not None:
            self._warn_if_guessed(rt)
        window = await self.window(rt)
        trigger: Trigger = "overflow" if state is not None else "manual"
        budget = self._budget(rt, window, self._estimate(rt, session), trigger, focus)
        return await self._compress(rt, session, budget)

    async def fill(self, rt: Runtime, session: SessionHandle) -> float | None:
        window = await self.window(rt, interruptible=False)
        return self._estimate(rt, session) / window if window else None

    async def window(self, rt: Runtime, *, interruptible: bool = True) -> int:
        """The active model's context window in tokens (looked up once per model)."""
        entry = rt.caller.chain.active
        key = entry.label
        if key not in self._windows:
            from talaria.providers.profiles.context_windows import context_window

            configured = self.config.model.context_length
            metadata = None if configured else await self._endpoint_window(rt, interruptible)
            size, source = context_window(
                entry.model, configured=configured, endpoint_metadata=metadata
            )
            log.info("context window of %s: %d tokens (%s)", key, size, source)
            self._windows[key] = int(size)
            if source != "default":
                self._window_told.add(key)  # known: nothing to warn about
        return self._windows[key]

    # ---- a compression ---------------------------------------------------------------------

    def _start_turn(self, state: object) -> None:
        """The caps are per turn; a new turn is a new state object (None: a manual /compress
        between turns, which always gets a fresh try)."""
        if state is None or state is not self._turn:
            self._turn = state
            self._count = 0
            self._stalled = False

    def _budget(
        self,
        rt: Runtime,
        window: int,
        estimated: int,
        trigger: Trigger,
        focus: str | None = None,
    ) -> Budget:
        keep = rt.services.todos.render() if rt.services is not None else ""
        return Budget(window, self.threshold, estimated, trigger, focus, keep)

    async def _compress(self, rt: Runtime, session: SessionHandle, budget: Budget) -> bool:
        if rt.hooks.has("pre_compact"):
            trigger = "manual" if budget.trigger == "manual" else "auto"
            await rt.hooks.aemit("pre_compact", trigger=trigger, session_id=session.id)
        with rt.telemetry.compression(session.id) as observed:
            await session.flush()  # nothing may be lost: saved before the history is rewritten
            history = session.history
            try:
                compressed = await self.engine.process(list(history), budget, self._summariser(rt))
            except CompressionFailed as failure:
                self._stalled = True
                rt.emit(Notice("warning", str(failure)))
                return False
            if compressed == history:
                return False
            system = _system(session)
            before = estimate_tokens([*system, *history], rt.tool_schemas)
            after = estimate_tokens([*system, *compressed], rt.tool_schemas)
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
            note = self.engine.describe(history, compressed)
            rt.emit(Notice("info", f"{note}; continuing in session {new_id}"))
            observed.compressed(len(history), len(compressed), new_id)
            return True

    def _summariser(self, rt: Runtime) -> Summarise:
        async def summarise(request: list[Message]) -> str:
            rt.emit(StatusChanged("compressing"))
            try:
                response = await self._summary_call(rt, request)
            except ProviderError as error:
                log.warning("the compression summary failed: %s", error)
                return ""
            return response.text or ""

        return summarise

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

    # ---- sizes -----------------------------------------------------------------------------

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

    def _estimate(self, rt: Runtime, session: SessionHandle) -> int:
        return int(self.tracker.estimate([*_system(session), *session.history], rt.tool_schemas))


class LegacyContext:
    """An engine written for the old contract, which received the whole runtime: its
    `before_request`, `compress`, `fill` and `window` run as they did."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    async def before_request(self, rt: Runtime, session: SessionHandle, state: object) -> None:
        await self.engine.before_request(rt, session, state)

    def record_usage(self, usage: Usage, message_count: int) -> None:
        self.engine.record_usage(usage, message_count)

    async def compress(
        self, rt: Runtime, session: SessionHandle, state: object, focus: str | None = None
    ) -> bool:
        compress = getattr(self.engine, "compress", None)
        return bool(await compress(rt, session, state, focus)) if compress else False

    async def fill(self, rt: Runtime, session: SessionHandle) -> float | None:
        fill = getattr(self.engine, "fill", None)
        return await fill(rt, session) if fill else None

    async def window(self, rt: Runtime, *, interruptible: bool = True) -> int | None:
        window = getattr(self.engine, "window", None)
        return await window(rt, interruptible=interruptible) if window else None


def _system(session: SessionHandle) -> list[Message]:
    return [{"role": "system", "content": session.system_prompt}] if session.system_prompt else []
