"""Blocking work (store writes, plugin hooks, user callbacks) off the event loop.

One bounded pool per process, shared by every agent, so a process running many agents does not
run a thread per agent, and a slow hook or a locked database delays only the call that waits
on it, never the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

MAX_WORKERS = 32
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def blocking_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                MAX_WORKERS, thread_name_prefix="talaria-blocking"
            )
        return _pool


async def run_blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `fn(*args, **kwargs)` on the shared pool and await its result."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(blocking_pool(), functools.partial(fn, *args, **kwargs))


def start_daemon(fn: Callable[[], None], name: str) -> None:
    """For work that may block without bound (a user deciding on an approval): its own
    daemon thread, so it can never starve the shared pool."""
    threading.Thread(target=fn, name=name, daemon=True).start()
