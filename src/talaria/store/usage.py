"""Usage reports: records added up by model, day or session (for `talaria usage`, `/usage`
and any front end that shows spending).

Tokens stay in the disjoint buckets; the cache hit ratio is the share of the prompt that was
read from the cache. A cost is a sum of known prices: records of models with no known price
are counted in `unpriced_calls`, never as $0.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from talaria.store.base import UsageRecord
from talaria.store.schema import USAGE_BUCKETS

GROUPINGS = ("model", "day", "session")


@dataclass
class UsageRow:
    key: str
    calls: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_BUCKETS, 0))
    cost_usd: float = 0.0
    """The sum of the known prices."""
    unpriced_calls: int = 0
    """Calls whose model has no known price (their cost is not in `cost_usd`)."""

    def add(self, record: UsageRecord) -> None:
        self.calls += record.calls
        for bucket in USAGE_BUCKETS:
            self.tokens[bucket] += int(record.usage.get(bucket) or 0)
        cost = record.usage.get("estimated_cost_usd")
        if cost is None:
            self.unpriced_calls += record.calls
        else:
            self.cost_usd += float(cost)

    def merge(self, other: UsageRow) -> None:
        self.calls += other.calls
        for bucket in USAGE_BUCKETS:
            self.tokens[bucket] += other.tokens[bucket]
        self.cost_usd += other.cost_usd
        self.unpriced_calls += other.unpriced_calls

    @property
    def prompt_tokens(self) -> int:
        t = self.tokens
        return t["input_tokens"] + t["cache_read_tokens"] + t["cache_write_tokens"]

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.tokens["output_tokens"]

    @property
    def cache_hit_ratio(self) -> float | None:
        prompt = self.prompt_tokens
        return self.tokens["cache_read_tokens"] / prompt if prompt else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "calls": self.calls,
            **self.tokens,
            "total_tokens": self.total_tokens,
            "cache_hit_ratio": self.cache_hit_ratio,
            "cost_usd": self.cost_usd if self.calls > self.unpriced_calls else None,
            "unpriced_calls": self.unpriced_calls,
        }


def local_day(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(timestamp))


KEYS: dict[str, Callable[[UsageRecord], str]] = {
    "model": lambda r: f"{r.provider}:{r.model}" if r.provider else r.model,
    "day": lambda r: local_day(r.created_at),
    "session": lambda r: r.session_id,
}


def summarise(records: Iterable[UsageRecord], by: str) -> list[UsageRow]:
    """One row per model (most expensive first), per day or per session (oldest first)."""
    if by not in KEYS:
        raise ValueError(f"usage can be grouped by {', '.join(GROUPINGS)}, not {by!r}")
    rows: dict[str, UsageRow] = {}
    for record in records:
        key = KEYS[by](record)
        rows.setdefault(key, UsageRow(key)).add(record)
    ordered = list(rows.values())
    if by == "model":
        ordered.sort(key=lambda row: (-row.cost_usd, -row.total_tokens, row.key))
    return ordered


def total(rows: Iterable[UsageRow]) -> UsageRow:
    combined = UsageRow("total")
    for row in rows:
        combined.merge(row)
    return combined
