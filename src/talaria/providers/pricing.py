"""What a model call cost, from the maintained `genai-prices` catalogue.

Prices change every few weeks; a hand-kept table goes stale silently, so we lean on the
pydantic team's catalogue (bundled data, no network at run time) and import it only when a
cost is first asked for, which keeps ``import talaria`` fast.
"""

from __future__ import annotations

from collections.abc import Iterator

from talaria.providers.base import Usage
from talaria.providers.profiles import ModelProfile, profile_for
from talaria.values import frozen

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


@frozen(slots=True)
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
    not what this reads, or its answers are not linear."""
    from datetime import UTC, datetime

    from genai_prices import data_snapshot
    from genai_prices.types import TieredPrices

    try:
        snapshot = data_snapshot.get_snapshot()
        _, model = snapshot.find_provider_model(model_ref, None, provider_id, None)
        price = model.get_prices(datetime.now(tz=UTC))
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
    except LookupError:
        raise
    except Exception:  # the catalogue's internals moved: ask it the slow way
        return None
    _LINEAR[id(price)] = (price, linear)
    return linear


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
