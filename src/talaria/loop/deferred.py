"""Work a turn starts when it is first asked for, once, and may wait for several times."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Started(Generic[T]):
    """`make()` runs as a task from the first `start` or `result`; later calls find it."""

    def __init__(self, make: Callable[[], Coroutine[Any, Any, T]]) -> None:
        self._make = make
        self._task: asyncio.Future[T] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._make())

    async def result(self) -> T:
        self.start()
        assert self._task is not None
        return await self._task
