"""A thread-safe interrupt that async code can wait on.

`interrupt()` may be called from any thread (a UI, a signal handler); the running turn sees it
both as a `threading.Event` (for tools in worker threads) and as an awaitable (for the model
call, which is abandoned the moment the signal fires).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class Interrupted(Exception):
    """The turn was interrupted while waiting on something."""


class InterruptSignal:
    def __init__(self) -> None:
        self.event = threading.Event()
        self.message: str | None = None
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @property
    def is_set(self) -> bool:
        return self.event.is_set()

    def set(self, message: str | None = None) -> None:
        with self._lock:
            if message is not None:
                self.message = message
            self.event.set()
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, future)

    def clear(self) -> None:
        with self._lock:
            self.event.clear()
            self.message = None

    async def wait(self) -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self.event.is_set():
                return
            self._waiters.append((loop, future))
        try:
            await future
        finally:
            with self._lock:
                self._waiters = [(lp, fut) for lp, fut in self._waiters if fut is not future]

    async def race(self, awaitable: Awaitable[T]) -> T:
        """Await `awaitable` unless the signal fires first: then cancel it and raise Interrupted."""
        task = asyncio.ensure_future(awaitable)
        if self.event.is_set():
            task.cancel()
            raise Interrupted
        waiter = asyncio.ensure_future(self.wait())
        try:
            done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            waiter.cancel()
        if task in done:
            return task.result()
        task.cancel()
        raise Interrupted

    async def sleep(self, seconds: float) -> None:
        """Sleep that ends at once (raising Interrupted) when the signal fires."""
        await self.race(asyncio.sleep(seconds))


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
