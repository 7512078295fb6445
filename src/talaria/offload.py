"""Blocking work off the event loop, on bounded thread pools shared by every agent of a process.

Two lanes, so that one kind of work cannot starve the other:

- `run_blocking` (the io lane): talaria's own short blocking work, store reads and writes.
- `run_user_code` (the user lane): code talaria does not control and that may block without
  bound: sync tool handlers, plugin hooks. A call the loop gives up on (a timeout, an
  interrupt) keeps its thread until the handler returns; the lane then runs one more worker in
  its place, so abandoned calls never shrink it (up to `USER_CEILING` threads in all).

A process running a thousand agents runs these few threads, not one per agent. Workers are
started on demand and exit after `IDLE_SECONDS` without work, so an idle process holds none.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

IO_WORKERS = 4
"""Store work: SQLite serialises writes per database and PostgreSQL pools ten connections,
so more threads would only wait on a lock."""
USER_WORKERS = 8
USER_CEILING = 64
IDLE_SECONDS = 15.0


class AbortedByUserCode(Exception):
    """User code raised a `BaseException` that is not an `Exception`: `SystemExit` (from
    `sys.exit` or an argument parser), `KeyboardInterrupt`, `GeneratorExit`, one of its own.
    It reaches the awaiting caller as this ordinary error: raised as it is, it would stop the
    shared event loop (asyncio re-raises SystemExit and KeyboardInterrupt out of the loop) or
    break the awaiting coroutine (GeneratorExit)."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__(str(raised))
        self.raised = raised


Deliver = Callable[[Any, BaseException | None], None]
"""How a worker hands back a job's outcome: (result, None) or (None, the exception)."""


@dataclass(slots=True, eq=False)
class _Job:
    """One blocking call waiting for a worker of a lane."""

    call: Callable[[], Any]
    deliver: Deliver
    dropped: bool = False
    """Abandoned before a worker took it: it is never run."""
    abandoned: bool = False
    """Abandoned while running: its worker no longer counts against the lane's size."""


class Lane:
    """A bounded pool whose workers start on demand and stop when idle; see the module doc."""

    def __init__(self, name: str, size: int, ceiling: int | None = None) -> None:
        self.name = name
        self.size = size
        self.ceiling = ceiling if ceiling is not None else size
        self._cond = threading.Condition()
        self._queue: collections.deque[_Job] = collections.deque()
        self._running: set[_Job] = set()
        self._workers = 0
        self._waiting = 0
        self._stuck = 0

    @property
    def workers(self) -> int:
        return self._workers

    def start(self, call: Callable[[], Any], deliver: Deliver) -> _Job:
        """Queue `call`; a worker runs it and passes its outcome to `deliver` (on its thread)."""
        job = _Job(call, deliver)
        with self._cond:
            self._queue.append(job)
            self._wake_or_start()
        return job

    def abandon(self, job: _Job) -> None:
        """The caller no longer waits for `job`: a queued call is dropped, a running one
        stops counting against the lane's size."""
        with self._cond:
            if job in self._running:
                if not job.abandoned:
                    job.abandoned = True
                    self._stuck += 1
                    if self._queue:
                        self._wake_or_start()
            else:
                job.dropped = True

    def _wake_or_start(self) -> None:
        if self._waiting >= len(self._queue):
            self._cond.notify()
        elif self._workers < min(self.size + self._stuck, self.ceiling):
            self._workers += 1
            name = f"talaria-{self.name}-{self._workers}"
            threading.Thread(target=self._work, name=name, daemon=True).start()

    def _work(self) -> None:
        while (job := self._next()) is not None:
            try:
                result = job.call()
            except BaseException as exc:  # handed to the waiter, as an executor does
                job.deliver(None, exc)
            else:
                job.deliver(result, None)
            with self._cond:
                self._running.discard(job)
                if job.abandoned:
                    self._stuck -= 1

    def _next(self) -> _Job | None:
        """The next job, or None when the worker should exit: idle for `IDLE_SECONDS`, or
        one more worker than the lane may have now that an abandoned call has returned."""
        with self._cond:
            while True:
                while not self._queue:
                    if self._workers > self.size + self._stuck or not self._wait_idle():
                        self._workers -= 1
                        return None
                job = self._queue.popleft()
                if not job.dropped:
                    self._running.add(job)
                    return job

    def _wait_idle(self) -> bool:
        """Under the lock: False when `IDLE_SECONDS` passed with nothing to do."""
        self._waiting += 1
        woken = self._cond.wait(IDLE_SECONDS)
        self._waiting -= 1
        return woken or bool(self._queue)


_lanes: dict[str, Lane] = {}
_lanes_lock = threading.Lock()


def lane(name: str) -> Lane:
    """The process's lane `name` ("io" or "user"), made on first use."""
    with _lanes_lock:
        found = _lanes.get(name)
        if found is None:
            if name == "io":
                found = Lane("io", IO_WORKERS)
            elif name == "user":
                found = Lane("user", USER_WORKERS, USER_CEILING)
            else:
                raise ValueError(f"no lane named {name!r}")
            _lanes[name] = found
        return found


async def run_blocking(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run `fn(*args, **kwargs)` (store work) on the io lane and await its result."""
    return await _run(lane("io"), functools.partial(fn, *args, **kwargs), None)


async def run_user_code(
    fn: Callable[..., T],
    /,
    *args: Any,
    kwargs: Mapping[str, Any] | None = None,
    timeout: float | None = None,
) -> T:
    """Run user code `fn(*args, **kwargs)` (a tool handler, a hook) on the user lane, in the
    caller's context (so spans it starts nest under the caller's). The keyword arguments come
    as one mapping, so a tool's own argument named `timeout` (or `fn`) is the tool's.
    TimeoutError after `timeout` seconds; on a timeout or a cancellation the call is
    abandoned, its thread left to finish alone."""
    call = functools.partial(contextvars.copy_context().run, fn, *args, **(kwargs or {}))
    return await _run(lane("user"), functools.partial(_contained, call), timeout)


def _contained(call: Callable[[], T]) -> T:
    try:
        return call()
    except Exception:
        raise
    except BaseException as exc:
        raise AbortedByUserCode(exc) from exc


async def _run(where: Lane, call: Callable[[], T], timeout: float | None) -> T:
    """The call's outcome reaches the loop in one hop (`call_soon_threadsafe`), without the
    concurrent.futures.Future and its chaining that `run_in_executor` pays for."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[T] = loop.create_future()

    def deliver(result: Any, error: BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed while an abandoned call ran
            loop.call_soon_threadsafe(_settle, waiter, result, error)

    job = where.start(call, deliver)
    timer = None if timeout is None else loop.call_later(timeout, _expire, waiter)
    try:
        return await waiter
    except (TimeoutError, asyncio.CancelledError):
        where.abandon(job)
        raise
    finally:
        if timer is not None:
            timer.cancel()


def _expire(waiter: asyncio.Future[Any]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


def _settle(waiter: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if waiter.done():  # the caller gave up first
        return
    if error is None:
        waiter.set_result(result)
    else:
        waiter.set_exception(error)


def start_daemon(fn: Callable[[], None], name: str) -> None:
    """For work that may block without bound (a user deciding on an approval): its own
    daemon thread, so it can never starve a lane."""
    threading.Thread(target=fn, name=name, daemon=True).start()
