"""One model call as the loop sees it: retries, credential refresh, timeouts and fallback.

This is the only retry layer (the SDK clients are built with ``max_retries=0``). A failure's
kind is looked up in `retry.ACTIONS`: transient failures are retried with backoff on the same
provider, an auth failure gets one credential refresh, and when a provider is used up the next
entry of the chain takes over. Failures that another layer must handle (an empty answer, a
prompt too long for the window) and failures nothing can fix are raised, attributed to the
provider that produced them.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from talaria.core import ModelClient, ModelRequest, ModelResponse, StreamHandler, Usage
from talaria.core.telemetry import NO_TELEMETRY, Scope, Telemetry
from talaria.events import EventSink, Notice, StatusChanged
from talaria.interrupt import InterruptSignal
from talaria.providers.errors import ErrorKind, ProviderError
from talaria.providers.resilience.chain import ChainEntry, ModelChain
from talaria.providers.resilience.credentials import CredentialSource
from talaria.providers.resilience.retry import Action, RetryPolicy, RetrySettings, action_for


@dataclass
class CallResult:
    """One model call's answer, with the attempts and errors it took."""

    response: ModelResponse
    client: ModelClient
    attempts: int
    errors: list[ProviderError] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    """Everything the call spent, including answers that were asked again (`response.usage`
    is the last answer's own count: the size of the context it saw)."""


class ModelTimeouts(Protocol):
    """The ``model.*`` time limits, as `config.model` answers them (see `RetrySettings`)."""

    @property
    def first_byte_timeout(self) -> float: ...

    @property
    def stream_idle_timeout(self) -> float: ...

    @property
    def total_timeout(self) -> float: ...


@dataclass(frozen=True)
class CallerSettings:
    """How long a model call may take and how it is retried: the settings `from_config`
    reads, whose defaults live in the schema (providers cannot import the configuration: the
    layer that can builds these and hands them down)."""

    retry: RetryPolicy
    first_byte_timeout: float
    """Seconds a stream may take to deliver its first delta (math.inf: no limit)."""
    idle_timeout: float
    """Seconds a started stream may stay silent (math.inf: no limit)."""
    total_timeout: float
    """Seconds one model call may take in all, however steadily it streams."""

    @classmethod
    def from_config(cls, model: ModelTimeouts, retry: RetrySettings) -> CallerSettings:
        """Settings from ``retry.*``, ``model.first_byte_timeout``,
        ``model.stream_idle_timeout`` (0 or a negative value turns those off) and
        ``model.total_timeout`` (`config.model`, `config.retry`)."""
        return cls(
            retry=RetryPolicy.from_config(retry),
            first_byte_timeout=_limit(model.first_byte_timeout),
            idle_timeout=_limit(model.stream_idle_timeout),
            total_timeout=_limit(model.total_timeout),
        )


def _limit(seconds: float) -> float:
    return float(seconds) if seconds > 0 else math.inf


class _Next(Enum):
    SAME = "same"  # try the same entry again
    MOVE = "move"  # fall back to the next entry, or fail when there is none
    STOP = "stop"  # raise: another layer handles it, or nothing can


class ModelCaller:
    def __init__(
        self,
        chain: ModelChain,
        emit: EventSink,
        settings: CallerSettings,
        *,
        credentials: Sequence[CredentialSource | None] = (),
    ) -> None:
        self.chain = chain
        self.emit = emit
        self.settings = settings
        self._credentials = {
            id(entry): source
            for entry, source in zip(chain.entries, credentials, strict=False)
            if source is not None
        }
        self._refreshed: set[int] = set()
        self.turn_attempts = 0
        """Requests sent since the turn started, failed ones included."""
        self.telemetry: Telemetry = NO_TELEMETRY

    def start_turn(self) -> None:
        """Per-turn state (docs/architecture.md): the fallback position, refreshes and counts are
        per turn."""
        self.chain.reset_turn()
        self._refreshed.clear()
        self.turn_attempts = 0

    async def call(
        self, request: ModelRequest, stream: StreamHandler, interrupt: InterruptSignal
    ) -> CallResult:
        with self.telemetry.model_call(request, self.chain.active) as observed:
            return await self._call(request, stream, interrupt, observed)

    async def _call(
        self,
        request: ModelRequest,
        stream: StreamHandler,
        interrupt: InterruptSignal,
        observed: Scope,
    ) -> CallResult:
        errors: list[ProviderError] = []
        attempts = tries = 0
        while True:
            entry = self.chain.active
            attempts += 1
            tries += 1
            self.turn_attempts += 1
            settings = self.settings
            watch = Watchdog(
                stream, settings.first_byte_timeout, settings.idle_timeout, settings.total_timeout
            )
            try:
                client = entry.client()
                response = await interrupt.race(
                    watch.guard(client.complete(request, watch), streaming=request.stream)
                )
                observed.answered(client, response)
                return CallResult(response, client, attempts, errors, response.usage)
            except ProviderError as error:
                error.provider = error.provider or entry.provider
                error.model = error.model or entry.model
                errors.append(error)
            failure = errors[-1]
            step = await self._recover(failure, entry, tries, watch.text_seen, interrupt)
            if step is _Next.SAME:
                observed.attempt_failed(failure, "retry")
                continue
            if step is _Next.MOVE and self.fall_back(failure.kind.value):
                observed.attempt_failed(failure, "fallback", self.chain.active)
                tries = 0
                continue
            observed.attempt_failed(failure, "raise")
            raise _summarised(failure, errors)

    def fall_back(self, reason: str) -> bool:
        """Make the next chain entry active; False when there is none left."""
        previous = self.chain.active
        if not self.chain.advance():
            return False
        active = self.chain.active
        self.emit(
            Notice("warning", f"{previous.label} failed ({reason}); falling back to {active.label}")
        )
        self.emit(StatusChanged("fallback", active.label))
        return True

    async def _recover(
        self,
        error: ProviderError,
        entry: ChainEntry,
        tries: int,
        text_seen: bool,
        interrupt: InterruptSignal,
    ) -> _Next:
        """What to do after a failed attempt: the `ACTIONS` entry for its kind, carried out."""
        action = action_for(error.kind)
        delay: float | None = None
        if action is Action.RETRY:
            delay = self._retry_delay(error, tries)
            step = _Next.MOVE if delay is None else _Next.SAME
        elif action is Action.REFRESH:
            step = _Next.SAME if await self._refresh(error, entry, interrupt) else _Next.MOVE
        elif action is Action.FALLBACK:
            step = _Next.MOVE
        else:
            return _Next.STOP
        has_next = self.chain.position + 1 < len(self.chain.entries)
        if text_seen and (step is _Next.SAME or has_next):
            self.emit(
                Notice(
                    "warning",
                    f"{entry.label}: the answer broke off "
                    f"({error.kind.value}); retrying; the partial answer "
                    "above is discarded",
                )
            )
        if delay is not None:
            self.emit(
                Notice(
                    "warning",
                    f"{entry.label}: {error.kind.value}; retrying in "
                    f"{delay:.2g} s (attempt {tries + 1} of "
                    f"{self.settings.retry.max_attempts})",
                )
            )
            self.emit(StatusChanged("retrying", entry.label))
            await interrupt.sleep(delay)
        return step

    def _retry_delay(self, error: ProviderError, tries: int) -> float | None:
        """The backoff before another attempt on the same entry; None when it is used up."""
        policy = self.settings.retry
        if tries >= policy.max_attempts:
            return None
        delay = policy.delay(tries, error.retry_after)
        if delay is None:
            error.message += (
                f" (the provider asks to wait {error.retry_after:g} s, longer than "
                f"retry.max_delay {policy.max_delay:g} s)"
            )
        return delay

    async def _refresh(
        self, error: ProviderError, entry: ChainEntry, interrupt: InterruptSignal
    ) -> bool:
        """Swap in a fresh key, at most once per entry and turn; True when there was one."""
        spec = entry.spec
        if spec is None or id(entry) in self._refreshed:
            return False
        self._refreshed.add(id(entry))
        source = self._credentials.get(id(entry)) or CredentialSource()
        key = await interrupt.race(asyncio.to_thread(source.fresh_key, spec))
        if not key:
            return False
        await entry.aclose()
        entry.replace_spec(spec.with_key(key))
        status = error.status or "auth"
        self.emit(
            Notice(
                "warning",
                f"{entry.label}: credential rejected ({status}); retrying with a refreshed key",
            )
        )
        return True


def _summarised(error: ProviderError, errors: list[ProviderError]) -> ProviderError:
    """The last error; when several providers failed, its message names each one's failure."""
    seen: dict[str, str] = {}
    for failure in errors:
        seen[f"{failure.provider}:{failure.model}"] = failure.kind.value
    if len(seen) > 1:
        summary = "; ".join(f"{label} {kind}" for label, kind in seen.items())
        error.message = f"{error.message} (every provider failed: {summary})"
    return error


MAX_TICK = 1.0
"""Longest wait between two silence checks; also the most blocked time one check can count."""


class Watchdog:
    """Forwards stream deltas to the loop's handler and notes when they arrive, so that
    `guard` can fail a stream that never starts or goes silent (a dropped connection the
    socket has not noticed), instead of waiting for the SDK's long overall timeout."""

    def __init__(
        self, inner: StreamHandler, first_byte: float, idle: float, total: float = math.inf
    ) -> None:
        self.inner = inner
        self.first_byte = first_byte
        self.idle = idle
        self.total = total
        self.text_seen = False
        """True once visible answer text reached the user."""
        self._last: float | None = None

    def text(self, delta: str) -> None:
        self._beat()
        if delta:
            self.text_seen = True
        self.inner.text(delta)

    def reasoning(self, delta: str) -> None:
        self._beat()
        self.inner.reasoning(delta)

    def tool_call(self, index: int, call_id: str, name: str) -> None:
        self._beat()
        self.inner.tool_call(index, call_id, name)

    def tool_arguments(self, index: int, delta: str) -> None:
        self._beat()
        self.inner.tool_arguments(index, delta)

    def _beat(self) -> None:
        self._last = asyncio.get_running_loop().time()

    async def guard(self, call: Awaitable[ModelResponse], *, streaming: bool) -> ModelResponse:
        """Await the call, failing it with a TIMEOUT error when the stream is silent too long
        or the whole call outlasts `total` (a stream that never ends).

        Silence and the total are counted in short ticks and only while the event loop could
        listen: time the loop spent blocked (importing an SDK on first use, a slow callback) is
        not the provider's fault and does not count. The call runs in the caller's task; a
        timer checks at every tick and, on a breach, cancels the task (as `asyncio.timeout`
        does), so the abandoned stream's connection is closed before a retry.
        """
        first_byte = self.first_byte if streaming else math.inf
        idle = self.idle if streaming else math.inf
        if math.isinf(first_byte) and math.isinf(idle) and math.isinf(self.total):
            return await call
        task = asyncio.current_task()
        assert task is not None, "guard needs a running task"
        check = _Check(self, task, first_byte, idle)
        try:
            return await call
        except asyncio.CancelledError:
            if check.breach is not None and task.uncancel() == 0:
                raise check.breach from None
            raise
        finally:
            check.stop()

    def _overrun(self) -> ProviderError:
        return ProviderError(
            f"the call took longer than {self.total:g} s (model.total_timeout); abandoned",
            kind=ErrorKind.TIMEOUT,
            output_started=self.text_seen,
        )

    def _timeout(self, limit: float, waiting_first: bool) -> ProviderError:
        if waiting_first:
            message = f"no first byte for {limit:g} s (model.first_byte_timeout)"
        else:
            message = f"the stream went silent for {limit:g} s (model.stream_idle_timeout)"
        return ProviderError(
            message,
            kind=ErrorKind.TIMEOUT,
            output_started=self.text_seen,
        )


class _Check:
    """The watchdog's timer for one call: every tick it adds the time that passed (at most
    the tick: longer means the loop was blocked) and cancels the call's task on a breach."""

    def __init__(
        self, watch: Watchdog, task: asyncio.Task[Any], first_byte: float, idle: float
    ) -> None:
        self.watch, self.task = watch, task
        self.first_byte, self.idle = first_byte, idle
        self.loop = task.get_loop()
        self.tick = min(MAX_TICK, first_byte / 4, idle / 4, watch.total / 4)
        self.silent = self.spent = 0.0
        self.breach: ProviderError | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._arm()

    def _limit(self) -> float:
        return self.first_byte if self.watch._last is None else self.idle

    def _arm(self) -> None:
        wake = min(self._limit() - self.silent, self.tick, self.watch.total - self.spent)
        self._handle = self.loop.call_later(wake, self._check, self.loop.time(), wake)

    def _check(self, before: float, wake: float) -> None:
        watch, now = self.watch, self.loop.time()
        self.spent += min(now - before, wake)
        if watch._last is not None and watch._last > before:
            self.silent = min(now - watch._last, wake)
        else:
            self.silent += min(now - before, wake)
        waiting_first = watch._last is None
        limit = self._limit()
        if self.silent >= limit:
            self.breach = watch._timeout(limit, waiting_first)
        elif self.spent >= watch.total:
            self.breach = watch._overrun()
        if self.breach is None:
            self._arm()
        else:
            self._handle = None
            self.task.cancel()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
