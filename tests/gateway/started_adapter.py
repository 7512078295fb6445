"""An adapter under test, started, with what it hands the gateway kept in order."""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

from talaria.gateway.platform import Inbound, Platform, Update

P = TypeVar("P", bound=Platform)
WAIT_S = 60.0


class Started(Generic[P]):
    """`platform` plus the updates it delivered (`next`, `next_message`)."""

    def __init__(self, platform: P) -> None:
        self.platform = platform
        self.updates: asyncio.Queue[Update] = asyncio.Queue()

    async def sink(self, update: Update) -> None:
        await self.updates.put(update)

    async def __aenter__(self) -> Started[P]:
        await self.platform.start(self.sink)
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.platform.stop()

    async def next(self) -> Update:
        return await asyncio.wait_for(self.updates.get(), WAIT_S)

    async def next_message(self) -> Inbound:
        update = await self.next()
        assert isinstance(update, Inbound), update
        return update
