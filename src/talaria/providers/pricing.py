"""What a model call cost, from the maintained `genai-prices` catalogue.

Prices change every few weeks; a hand-kept table goes stale silently, so we lean on the
pydantic team's catalogue (bundled data, no network at run time) and import it only when a
cost is first asked for, which keeps ``import talaria`` fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, time
from typing import Any

from talaria.core import Usage
from talaria.providers import price_cache
from talaria.providers.profiles import ModelProfile, profile_for

_CATALOGUE_IDS: dict[str, str | None] = {
    "openai-codex": "openai",
    "codex": "openai",
    "custom": None,
}
"""talaria provider names whose catalogue id differs; others are passed through as they are."""
_UNKNOWN: set[tuple[str, str | None]] = set()
"""Lookups the catalogue has no model for. It caches what it finds but not what it misses, and
a miss scans every provider's models again: for a local or unlisted model that was a scan on
every step."""


def estimate_cost(
    model: str, usage: Usage, provider: str | None = None, profile: ModelProfile | None = None
) -> float | None:
    """The USD cost of ``usage`` on ``model``; None when the catalogue does not know the model.

    ``model`` may carry a provider prefix (``anthropic/claude-sonnet-4``): the prefixed id is
    tried at ``provider`` first (OpenRouter prices under those ids), then the bare id at the
    prefix's own provider.
    """
    name = (provider or "").lower()
    if not (profile or profile_for(provider=name, model=model)).billed:
        return 0.0
    lookups = [
        lookup
        for lookup in _candidates(model, _CATALOGUE_IDS.get(name, name or None))
        if lookup not in _UNKNOWN
    ]
    for lookup in lookups:
        try:
            return _priced(lookup, usage)
        except LookupError:
            _UNKNOWN.add(lookup)
    return None


def _priced(lookup: tuple[str, str | None], usage: Usage) -> float:
    """The catalogue's price of `usage`; LookupError when it does not know the model."""
    linear = _linear_price(*lookup)
    if linear is None or usage.total_tokens >= linear.below:
        from genai_prices import calc_price

        model_ref, provider_id = lookup
        return float(calc_price(_counted(usage), model_ref, provider_id=provider_id).total_price)
    counts = (
        usage.input_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.output_tokens,
    )
    return linear.fee + sum(rate * n for rate, n in zip(linear.per_token, counts, strict=True))


@dataclass(frozen=True, slots=True)
class _LinearPrice:
    """A catalogue price as a request fee plus a price per token of each bucket (input,
    cache read, cache write, output), valid for calls of fewer than `below` tokens in all."""

    fee: float
    per_token: tuple[float, float, float, float]
    below: float


_LINEAR: dict[int, tuple[object, _LinearPrice | None]] = {}
"""Per catalogue price (by identity; the price is kept so that its id stays its own)."""
_PROBE = 1_000
"""Tokens per bucket the per-token prices are read at: far below any tier's start."""


def _linear_price(model_ref: str, provider_id: str | None) -> _LinearPrice | None:
    """The price now in force for the model, as a linear one: the catalogue prices each
    call through its unit registry, about 0.2 ms, and a turn asks at every model call. Tiered
    prices (a prompt past a threshold pays another rate for every token) are linear below
    their first tier. None (ask the catalogue every time) when the catalogue's internals are
    not what this reads, or its answers are not linear. What holds at any time is kept on disk
    (`price_cache`), and later processes do not import the catalogue to read it."""
    key = f"{provider_id or '*'}/{model_ref}"
    stored = price_cache.lookup(key)
    if stored == price_cache.UNKNOWN:
        raise LookupError(f"the catalogue has no price for {key}")
    if stored == price_cache.SLOW:
        return None
    if isinstance(stored, tuple):
        return _LinearPrice(*stored)
    return _from_catalogue(key, model_ref, provider_id)


def _from_catalogue(key: str, model_ref: str, provider_id: str | None) -> _LinearPrice | None:
    from genai_prices import data_snapshot

    try:
        snapshot = data_snapshot.get_snapshot()
        try:
            _, model = snapshot.find_provider_model(model_ref, None, provider_id, None)
        except LookupError:
            price_cache.remember(key, price_cache.UNKNOWN)
            raise
        now = datetime.now(tz=UTC)
        linear = _linear(model.get_prices(now))
        hourly = _by_the_hour(model.prices)
        until = None if hourly else _in_force_until(model.prices, now)
    except LookupError:
        raise
    except Exception:  # the catalogue's internals moved: ask it the slow way
        return None
    if not hourly:
        entry = price_cache.SLOW if linear is None else (linear.fee, linear.per_token, linear.below)
        price_cache.remember(key, entry, before=until)
    return linear


def _linear(price: Any) -> _LinearPrice | None:
    """`price` as a linear one, read once per catalogue price."""
    from genai_prices.types import TieredPrices

    known = _LINEAR.get(id(price))
    if known is not None and known[0] is price:
        return known[1]
    starts = [
        tier.start
        for value in vars(price).values()
        if isinstance(value, TieredPrices)
        for tier in value.tiers
    ]
    below = min(starts, default=float("inf"))
    linear = _probe(price, below) if below > 10 * _PROBE else None
    _LINEAR[id(price)] = (price, linear)
    return linear


def _by_the_hour(prices: object) -> bool:
    """Whether the price in force depends on the hour of the day (off-peak prices)."""
    from genai_prices.types import StartDateConstraint

    return isinstance(prices, list) and any(
        not isinstance(conditional.constraint, StartDateConstraint | None) for conditional in prices
    )


def _in_force_until(prices: object, now: datetime) -> float | None:
    """Until when (a POSIX time) the price in force now stays so: the start of the next
    dated price, else None (for ever)."""
    if not isinstance(prices, list):
        return None
    starts = [
        midnight.timestamp()
        for conditional in prices
        if conditional.constraint is not None
        and (midnight := datetime.combine(conditional.constraint.start_date, time(), UTC)) > now
    ]
    return min(starts, default=None)


def _probe(price: object, below: float) -> _LinearPrice | None:
    """Read the fee and the per-token prices off the catalogue's own answers for `_PROBE`
    tokens of each bucket; None unless all four at once cost their sum."""
    buckets = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")

    def cost(**tokens: int) -> float:
        counted = _counted(Usage(**tokens))
        return float(price.calc_price(counted)["total_price"])  # type: ignore[attr-defined]

    fee = cost()
    a, b, c, d = ((cost(**{bucket: _PROBE}) - fee) / _PROBE for bucket in buckets)
    together = cost(**dict.fromkeys(buckets, _PROBE))
    if abs(together - (fee + _PROBE * (a + b + c + d))) > 1e-9 * max(1.0, together):
        return None
    return _LinearPrice(fee, (a, b, c, d), below)


def _counted(usage: Usage) -> object:
    from genai_prices import Usage as CatalogueUsage

    return CatalogueUsage(
        input_tokens=usage.prompt_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
    )


def _candidates(model: str, provider_id: str | None) -> Iterator[tuple[str, str | None]]:
    """Lookups to try in order: as given, then split at the provider prefix, then bare."""
    yield model, provider_id
    prefix, _, bare = model.rpartition("/")
    if prefix:
        yield bare, _CATALOGUE_IDS.get(prefix.lower(), prefix.lower())
        yield bare, None
