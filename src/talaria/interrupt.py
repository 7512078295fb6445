"""A thread-safe interrupt that async code can wait on.

`interrupt()` may be called from any thread (a UI, a signal handler); the running turn sees it
both as a `threading.Event` (for tools in worker threads) and as an awaitable (for the model
call, which is abandoned the moment the signal fires).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Interrupted(Exception):
    """The turn was interrupted while waiting on something."""


class RaceEntry:
    """One `race` in progress: the task to cancel when the signal fires."""

    __slots__ = ("active", "fired", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.fired = False
        self.active = True

    def fire(self) -> None:
        """On the task's loop: cancel the racing task, unless its race has already ended."""
        if self.active and not self.fired:
            self.fired = True
            self.task.cancel()


class InterruptSignal:
    def __init__(self) -> None:
        self.event = threading.Event()
        self.message: str | None = None
        self._lock = threading.Lock()
        self._races: list[RaceEntry] = []

    @property
    def is_set(self) -> bool:
        return self.event.is_set()

    def set(self, message: str | None = None) -> None:
        with self._lock:
            if message is not None:
                self.message = message
            self.event.set()
            races, self._races = self._races, []
        for race in races:
            self._fire_soon(race)

    def _fire_soon(self, race: RaceEntry) -> None:
        """From any thread: fire `race` on its task's loop."""
        loop = race.task.get_loop()
        if not loop.is_closed():
            loop.call_soon_threadsafe(race.fire)

    def clear(self) -> None:
        with self._lock:
            self.event.clear()
            self.message = None

    async def race(self, awaitable: Awaitable[T]) -> T:
        """Await `awaitable` unless the signal fires first: then cancel it and raise Interrupted.

        The awaitable runs in the caller's task, which the signal cancels (as `asyncio.timeout`
        does), so a race costs no task of its own on every model call and tool batch."""
        task = asyncio.current_task()
        assert task is not None, "race needs a running task"
        race = RaceEntry(task)
        with self._lock:
            interrupted = self.event.is_set()
            if not interrupted:
                self._races.append(race)
        if interrupted:
            _discard(awaitable)
            raise Interrupted
        try:
            result = await awaitable
        except BaseException:
            # What the cancellation raised: CancelledError, or what the work made of it (a
            # workflow's activity raises ActivityError). Another cancellation still counts.
            if race.fired and task.uncancel() == 0:
                raise Interrupted from None
            raise
        finally:
            self._end(race)
        if race.fired:  # the awaitable swallowed the cancellation and finished anyway
            task.uncancel()
        return result

    def _end(self, race: RaceEntry) -> None:
        race.active = False
        with self._lock:
            if race in self._races:
                self._races.remove(race)

    async def sleep(self, seconds: float) -> None:
        """Sleep that ends at once (raising Interrupted) when the signal fires."""
        await self.race(asyncio.sleep(seconds))


def _discard(awaitable: Awaitable[Any]) -> None:
    """An awaitable that will never be awaited: close or cancel it, so nothing warns."""
    if isinstance(awaitable, Coroutine):
        awaitable.close()
    elif isinstance(awaitable, asyncio.Future):
        awaitable.cancel()
