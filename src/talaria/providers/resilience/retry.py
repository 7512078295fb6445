"""What to do about a failed model call, and how long to wait before trying again.

`ACTIONS` is the single table from failure kind to action; everything that reacts to a
`ProviderError` (the caller, the response repair, the turn) looks its kind up here instead of
keeping its own list. `RetryPolicy` is the one backoff schedule: the SDK clients are built with
``max_retries=0`` so that retries happen in exactly one layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from talaria.providers.errors import ErrorKind


class Action(StrEnum):
    RETRY = "retry"
    """Try the same provider again after a backoff; fall back once the attempts run out."""
    REFRESH = "refresh"
    """Refresh the credential once and retry; fall back when no fresh key helps."""
    COMPRESS = "compress"
    """The prompt is too long for the window: compress the history, then retry."""
    NUDGE = "nudge"
    """The model answered with nothing: ask once more with a note, then fall back."""
    FALLBACK = "fallback"
    """Go straight to the next provider: asking this one again cannot help."""
    FAIL = "fail"
    """End the turn with the error's message: nothing on our side can fix it."""


ACTIONS: dict[ErrorKind, Action] = {
    ErrorKind.RATE_LIMIT: Action.RETRY,
    ErrorKind.OVERLOADED: Action.RETRY,
    ErrorKind.SERVER: Action.RETRY,
    ErrorKind.CONNECTION: Action.RETRY,
    ErrorKind.TIMEOUT: Action.RETRY,
    ErrorKind.INVALID_RESPONSE: Action.RETRY,
    ErrorKind.TRUNCATED: Action.RETRY,
    ErrorKind.AUTH: Action.REFRESH,
    ErrorKind.CONTEXT_OVERFLOW: Action.COMPRESS,
    ErrorKind.EMPTY_RESPONSE: Action.NUDGE,
    ErrorKind.REFUSAL: Action.FAIL,
    ErrorKind.BAD_REQUEST: Action.FAIL,
    ErrorKind.CONFIG: Action.FAIL,
}


def action_for(kind: ErrorKind) -> Action:
    return ACTIONS.get(kind, Action.FAIL)


def _random() -> float:
    """`random.random`, imported at the first retry: at start-up the import costs 4 ms."""
    import random

    return random.random()


class RetrySettings(Protocol):
    """The ``retry.*`` settings, as `config.retry` answers them (defaults included): the
    configuration imports the providers, so they name what they read instead of importing
    it."""

    @property
    def max_attempts(self) -> int: ...

    @property
    def base_delay(self) -> float: ...

    @property
    def max_delay(self) -> float: ...


@dataclass(frozen=True)
class RetryPolicy:
    """Jittered exponential backoff, capped, that defers to the server's Retry-After. Its
    numbers are the ``retry.*`` settings (`from_config`): their defaults live in the schema."""

    max_attempts: int
    """Attempts per provider and call, the first one included."""
    base_delay: float
    max_delay: float
    rng: Callable[[], float] = field(default=_random, compare=False, repr=False)
    """The randomness seam (the seams-not-I/O invariant, docs/architecture.md): a float in [0,
    1)."""

    @classmethod
    def from_config(cls, retry: RetrySettings) -> RetryPolicy:
        """The policy from the ``retry.*`` settings (`config.retry`: defaults included)."""
        return cls(
            max_attempts=max(1, int(retry.max_attempts)),
            base_delay=max(0.0, float(retry.base_delay)),
            max_delay=max(0.0, float(retry.max_delay)),
        )

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based).

        "Equal jitter": half of the exponential step is fixed, half random, so clients that
        failed together do not retry together, and no wait collapses to zero.
        """
        step = min(self.max_delay, self.base_delay * 2 ** max(0, attempt - 1))
        return step / 2 + self.rng() * step / 2

    def delay(self, attempt: int, retry_after: float | None) -> float | None:
        """The wait before the next attempt; None when the provider asks for longer than
        ``max_delay`` (waiting that long inside a turn is worse than falling back or failing)."""
        if retry_after is None:
            return self.backoff(attempt)
        if retry_after > self.max_delay:
            return None
        return retry_after
