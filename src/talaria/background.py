"""One event loop on a daemon thread for the whole process: where sync `Agent.chat()` runs.

Plain (non-async) code calling `chat()` / `run_conversation()` needs a loop for the turn. One
shared loop, started on first use, keeps every agent's connections alive between turns without
an event loop (selector, wake-up pipe, resolver thread) per agent. The turn runs in a copy of
the caller's context, so its spans nest under the caller's. Callbacks run on this loop's
thread, like every other sync caller's: a callback should return quickly.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

CANCEL_GRACE = 10.0
"""Seconds a cancelled turn may take to save what it has (its `finally` blocks)."""

WAKE_EVERY = 0.2
"""Seconds between the waiting thread's wake-ups: a signal the kernel hands to another of the
process's threads (the loop's, a worker's) does not end a wait on a lock, and the main thread
runs the signal's handler (Ctrl+C) only once it wakes."""

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def shared_loop() -> asyncio.AbstractEventLoop:
    """The process's background loop, started on first use."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            threading.Thread(
                target=_serve, args=(loop, ready), name="talaria-loop", daemon=True
            ).start()
            ready.wait()
            _loop = loop
        return _loop


def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    loop.run_forever()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on the shared loop and wait for it (waking every `WAKE_EVERY` seconds, so
    that Ctrl+C is seen). If the wait itself is interrupted
    (Ctrl+C: KeyboardInterrupt), the coroutine is cancelled and given `CANCEL_GRACE` seconds
    to finish (its `finally` blocks save what it has) before the exception goes on, so nothing
    keeps running unseen."""
    finished = threading.Event()

    async def tracked() -> T:
        try:
            return await coro
        finally:
            finished.set()

    # the task is created by a callback that runs in a copy of this thread's context
    future = asyncio.run_coroutine_threadsafe(tracked(), shared_loop())
    try:
        while not future.done():
            concurrent.futures.wait((future,), timeout=WAKE_EVERY)
        return future.result()
    except BaseException:
        future.cancel()
        finished.wait(CANCEL_GRACE)
        raise
