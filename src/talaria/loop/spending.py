"""Budgets in money and tokens: stop a turn before it spends more than the user allowed.

`agent.max_cost_usd` and `agent.max_tokens_per_turn` limit one turn,
`agent.max_session_cost_usd` and `agent.max_session_tokens` the whole session. Before each
model call the loop asks the turn's `SpendMeter` whether one more working call *and* a closing
summary would still fit; when not, it asks for the summary alone if that fits, and otherwise
stops with a note. Tools are never interrupted: the check runs only between model calls.

A child agent (`delegate_task`) meters against its parent: every call it makes is charged to
the parent's meter as well, as it happens, so the parent's limits stop the child too. The
link travels in a context variable, the same way the child's spans find the parent's trace.
"""

from __future__ import annotations

import contextvars
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from talaria.context.tokens import ContextTracker
from talaria.core import Usage

if TYPE_CHECKING:
    from talaria.config_types import AgentSection

DEFAULT_OUTPUT_RESERVE = 512
"""Output tokens a call is assumed to need before the turn has shown a real figure."""

BUDGET_SUMMARY_REQUEST = (
    "[The spending budget for this turn is used up; no more tools can run.] Reply to the user "
    "now without calling tools: summarise what you did, what you found, and what is left to do."
)

ACTIVE_METER: contextvars.ContextVar[SpendMeter | None] = contextvars.ContextVar(
    "talaria_spend_meter", default=None
)


@dataclass
class Budgets:
    """An agent's limits, and what checking them remembers from one turn to the next."""

    turn_cost: float | None = None
    session_cost: float | None = None
    turn_tokens: int | None = None
    session_tokens: int | None = None
    unpriced_noted: set[str] = field(default_factory=set)
    """Models already reported as unpriced (the notice is given once per model)."""
    request_size: ContextTracker = field(default_factory=ContextTracker)
    """Sizes the next request from the provider's count for the last one."""

    @classmethod
    def from_config(cls, agent: AgentSection) -> Budgets:
        """The `agent.*` limits (None: no limit)."""

        def number(value: float | None) -> float | None:
            return None if value is None else float(value)

        return cls(
            turn_cost=number(agent.max_cost_usd),
            session_cost=number(agent.max_session_cost_usd),
            turn_tokens=agent.max_tokens_per_turn,
            session_tokens=agent.max_session_tokens,
        )

    @property
    def any_cost(self) -> bool:
        return self.turn_cost is not None or self.session_cost is not None

    @property
    def per_session(self) -> bool:
        return self.session_cost is not None or self.session_tokens is not None

    @property
    def any(self) -> bool:
        return self.any_cost or self.per_session or self.turn_tokens is not None


@dataclass(frozen=True)
class Verdict:
    """What the next model call may be: a working call, only the summary, or none."""

    exceeded: str | None = None
    """Which limit stops the turn ("the cost budget of $0.05 per turn ..."), None to go on."""
    summary_fits: bool = False


class SpendMeter:
    """What one turn has spent (its own calls, side calls and its children's calls)."""

    def __init__(
        self,
        budgets: Budgets,
        session_before: Usage | None = None,
        parent: SpendMeter | None = None,
    ) -> None:
        self.budgets = budgets
        self.session_before = session_before or Usage()
        self.parent = parent
        self.spent = Usage()
        self.largest_output = 0
        self._lock = threading.Lock()

    def charge(self, usage: Usage) -> None:
        """Count `usage` here and in every ancestor (thread-safe: children run in threads)."""
        meter: SpendMeter | None = self
        while meter is not None:
            with meter._lock:
                meter.spent.add(usage)
                meter.largest_output = max(meter.largest_output, usage.output_tokens)
            meter = meter.parent

    def output_reserve(self) -> int:
        return self.largest_output or DEFAULT_OUTPUT_RESERVE

    def verdict(self, next_call: Usage) -> Verdict:
        """Whether a working call plus a summary (each like `next_call`) still fit in every
        limit of this meter and its ancestors; a cost limit with an unknown price is skipped
        (see `unpriced`)."""
        meter: SpendMeter | None = self
        summary_fits = True
        stop: str | None = None
        while meter is not None:
            for label, used, limit, need in meter._checks(next_call):
                if used + 2 * need > limit:
                    stop = stop or label
                    summary_fits = summary_fits and used + need <= limit
            meter = meter.parent
        return Verdict(stop, summary_fits) if stop else Verdict()

    def _checks(self, next_call: Usage) -> list[tuple[str, float, float, float]]:
        """(what the limit is, spent, limit, the next call's share) for each limit that can be
        enforced: set, and with known prices when it is in money."""
        limits, before = self.budgets, self.session_before
        with self._lock:
            cost, tokens = self.spent.estimated_cost_usd, self.spent.total_tokens
        known = before.estimated_cost_usd is not None and cost is not None
        session_cost = (before.estimated_cost_usd or 0.0) + (cost or 0.0) if known else None
        need_cost, need_tokens = next_call.estimated_cost_usd, next_call.total_tokens
        rows = (
            ("cost", "per turn (agent.max_cost_usd)", limits.turn_cost, cost, need_cost),
            ("cost", "per session (agent.max_session_cost_usd)", limits.session_cost,
             session_cost, need_cost),
            ("token", "per turn (agent.max_tokens_per_turn)", limits.turn_tokens, tokens,
             need_tokens),
            ("token", "per session (agent.max_session_tokens)", limits.session_tokens,
             before.total_tokens + tokens, need_tokens),
        )  # fmt: skip
        checks = []
        for kind, scope, limit, used, need in rows:
            if limit is None or used is None or need is None:
                continue
            amount = f"${limit:g}" if kind == "cost" else f"{int(limit)} tokens"
            checks.append((f"the {kind} budget of {amount} {scope}", used, limit, need))
        return checks

    def unpriced(self, next_call: Usage) -> bool:
        """True when a cost limit applies here but the spend or the model has no price."""
        return self.budgets.any_cost and (
            next_call.estimated_cost_usd is None or self.spent.estimated_cost_usd is None
        )


def open_meter(budgets: Budgets, session_before: Usage | None) -> SpendMeter | None:
    """The meter for a turn starting now (`session_before`: the session's totals so far),
    under the running turn's meter when this agent is a child started from one of that turn's
    tools; None when no limit applies at all."""
    parent = ACTIVE_METER.get()
    if not budgets.any and parent is None:
        return None
    return SpendMeter(budgets, session_before, parent)


def charge_active(usage: Usage) -> None:
    """Charge the meter of the turn running in this context (side calls), if any."""
    meter = ACTIVE_METER.get()
    if meter is not None:
        meter.charge(usage)
