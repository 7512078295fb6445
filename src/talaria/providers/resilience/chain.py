"""The primary model and its fallbacks, as one thing the loop can call.

Clients are built lazily (the SDKs are slow to import) and per event loop, because an SDK's
connection pool belongs to the loop that opened it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from talaria.core import ModelClient
from talaria.providers.factory import ProviderSpec, build_client, profile_of_spec
from talaria.providers.profiles import ModelProfile, profile_of


@dataclass
class ChainEntry:
    """One model of the chain: its spec, and a client per event loop."""

    spec: ProviderSpec | None
    fixed_client: ModelClient | None = None
    """A client supplied by the user (e.g. a ScriptedModel); used on every loop as is."""
    _clients: dict[int, tuple[asyncio.AbstractEventLoop, ModelClient]] = field(
        default_factory=dict, repr=False
    )
    _profile: tuple[ProviderSpec, ModelProfile] | None = field(default=None, repr=False)

    @property
    def model(self) -> str:
        return self.spec.model if self.spec else str(getattr(self.fixed_client, "model", ""))

    @property
    def provider(self) -> str:
        return self.spec.provider if self.spec else str(getattr(self.fixed_client, "provider", ""))

    @property
    def api_mode(self) -> str:
        return self.spec.api_mode if self.spec else str(getattr(self.fixed_client, "api_mode", ""))

    @property
    def base_url(self) -> str:
        if self.spec is not None:
            return self.spec.base_url
        return str(getattr(self.fixed_client, "base_url", ""))

    @property
    def profile(self) -> ModelProfile:
        """What the model behind this entry accepts (the table's answer plus overrides);
        resolved once per spec, since the loop asks at every step."""
        if self.spec is None:
            return profile_of(self.fixed_client)
        if self._profile is None or self._profile[0] is not self.spec:
            self._profile = (self.spec, profile_of_spec(self.spec))
        return self._profile[1]

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"

    def client(self) -> ModelClient:
        if self.fixed_client is not None:
            return self.fixed_client
        assert self.spec is not None
        loop = asyncio.get_running_loop()
        cached = self._clients.get(id(loop))
        if cached is not None and cached[0] is loop:
            return cached[1]
        for key, (old_loop, _) in list(self._clients.items()):
            if old_loop.is_closed():
                del self._clients[key]
        client = build_client(self.spec)
        self._clients[id(loop)] = (loop, client)
        return client

    def replace_spec(self, spec: ProviderSpec) -> None:
        """Swap credentials or endpoint; clients are rebuilt on next use."""
        self.spec = spec
        self._clients.clear()

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        cached = self._clients.pop(id(loop), None)
        if cached is not None:
            await cached[1].aclose()


class ModelChain:
    """Primary first, then the fallbacks in order. The position is per turn."""

    def __init__(self, entries: Sequence[ChainEntry]) -> None:
        if not entries:
            raise ValueError("a model chain needs at least one entry")
        self.entries = list(entries)
        self.position = 0

    @property
    def active(self) -> ChainEntry:
        return self.entries[self.position]

    def reset_turn(self) -> None:
        self.position = 0

    def advance(self) -> bool:
        """Move to the next fallback; False when there is none."""
        if self.position + 1 >= len(self.entries):
            return False
        self.position += 1
        return True

    async def aclose(self) -> None:
        for entry in self.entries:
            await entry.aclose()
