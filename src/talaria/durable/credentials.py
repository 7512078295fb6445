"""A rejected key, refreshed on the worker that holds it.

In a normal turn the caller swaps in a fresh key on 401/403 and tries again. In a durable turn
the caller runs in the workflow, which holds no keys (its history must never contain one), so
the `model_call` activity does it: once per call, from the same sources as a normal turn
(`model.api_key_refresh`, `model.api_key_command`, the edited config file, the environment).
"""

from __future__ import annotations

import asyncio
from typing import Any

from talaria.events import Notice
from talaria.providers.errors import ProviderError
from talaria.providers.resilience.chain import ChainEntry
from talaria.providers.resilience.retry import Action, action_for


async def refresh_key(
    agent: Any, index: int, entry: ChainEntry, error: ProviderError
) -> Notice | None:
    """Swap a fresh key into `entry` (entry `index` of the agent's chain) after `error`; the
    notice to show, or None when the error is not a rejected key or no other key is found."""
    from talaria.assembly import credential_sources

    if action_for(error.kind) is not Action.REFRESH or entry.spec is None:
        return None
    sources = credential_sources(agent)
    source = sources[index] if index < len(sources) else None
    if source is None:
        return None
    key = await asyncio.to_thread(source.fresh_key, entry.spec)
    if not key:
        return None
    await entry.aclose()
    entry.replace_spec(entry.spec.with_key(key))
    status = error.status or "auth"
    return Notice(
        "warning", f"{entry.label}: credential rejected ({status}); retrying with a refreshed key"
    )
