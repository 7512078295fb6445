"""Reading the unread end of an answer in the background, so its connection can be reused.

The wire clients stop reading at a stream's last event (``data: [DONE]``, ``message_stop``),
which comes just before the body's own end (the chunked terminator). An HTTP/1.1 connection can
carry the next request only once that end is read, and both HTTP clients close a connection
whose answer was left unread: without this, every step of a tool loop would open a new
connection (and, over TLS, do a new handshake).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine, Hashable
from typing import Any

MAX_DRAIN = 64 * 1024
DRAIN_SECONDS = 2.0
"""How much of an answer left unread is read to keep its connection (more: it is closed)."""
DRAIN_WAIT = 0.05
"""Seconds a request waits for a connection being drained before it opens another."""


async def read_to_end(chunks: AsyncIterator[bytes]) -> bool:
    """Read and drop the rest of a body; True when it ended within the limits."""
    left = MAX_DRAIN
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for chunk in chunks:
                left -= len(chunk)
                if left < 0:
                    return False
    except Exception:
        return False  # a slow or broken end: the connection is not worth keeping
    return True


class Drains:
    """The drains under way, by origin, for one event loop."""

    def __init__(self) -> None:
        self._tasks: dict[Hashable, set[asyncio.Task[None]]] = {}

    def start(self, origin: Hashable, drain: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(drain)
        tasks = self._tasks.setdefault(origin, set())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def settle(self, origin: Hashable) -> None:
        """Wait a moment for ``origin``'s drains: their connections are about to be free."""
        if tasks := self._tasks.get(origin):
            await asyncio.wait(tasks, timeout=DRAIN_WAIT)

    async def aclose(self) -> None:
        for task in [task for tasks in self._tasks.values() for task in tasks]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
