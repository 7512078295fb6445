"""What a model call cost, from the maintained `genai-prices` catalogue.

Prices change every few weeks; a hand-kept table goes stale silently, so we lean on the
pydantic team's catalogue (bundled data, no network at run time) and import it only when a
cost is first asked for, which keeps ``import talaria`` fast.
"""

from __future__ import annotations

from collections.abc import Iterator

from talaria.providers.base import Usage
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
    if not lookups:
        return None
    from genai_prices import Usage as CatalogueUsage
    from genai_prices import calc_price

    counted = CatalogueUsage(
        input_tokens=usage.prompt_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
    )
    for lookup in lookups:
        model_ref, provider_id = lookup
        try:
            price = calc_price(counted, model_ref, provider_id=provider_id)
        except LookupError:
            _UNKNOWN.add(lookup)
            continue
        return float(price.total_price)
    return None


def _candidates(model: str, provider_id: str | None) -> Iterator[tuple[str, str | None]]:
    """Lookups to try in order: as given, then split at the provider prefix, then bare."""
    yield model, provider_id
    prefix, _, bare = model.rpartition("/")
    if prefix:
        yield bare, _CATALOGUE_IDS.get(prefix.lower(), prefix.lower())
        yield bare, None
