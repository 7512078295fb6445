"""`InterruptSignal.race`: the awaited work runs in the caller's task, and the signal (from any
thread) cancels it there, so the work's own cleanup runs before `Interrupted` is raised."""

from __future__ import annotations

import asyncio
import threading
import warnings

import pytest

from talaria.interrupt import Interrupted, InterruptSignal


async def test_the_result_comes_back_when_nothing_interrupts() -> None:
    async def work() -> str:
        await asyncio.sleep(0)
        return "done"

    assert await InterruptSignal().race(work()) == "done"


async def test_an_interrupt_from_another_thread_stops_the_work_and_its_cleanup_runs() -> None:
    signal = InterruptSignal()
    started = asyncio.Event()
    cleaned = []

    async def work() -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            cleaned.append("closed")
        return "never"

    async def interrupt_when_started() -> None:
        await started.wait()
        threading.Thread(target=signal.set, args=("stop",)).start()

    helper = asyncio.create_task(interrupt_when_started())
    with pytest.raises(Interrupted):
        await signal.race(work())
    await helper
    assert cleaned == ["closed"]
    assert signal.message == "stop"
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0, "the task is not left cancelling"
    async with asyncio.timeout(5):  # and timeouts still work in it
        await asyncio.sleep(0)


async def test_a_real_cancellation_is_not_mistaken_for_an_interrupt() -> None:
    signal = InterruptSignal()
    entered = asyncio.Event()

    async def racer() -> None:
        async def work() -> None:
            entered.set()
            await asyncio.sleep(60)

        await signal.race(work())

    task = asyncio.create_task(racer())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    signal.set()  # a race that has ended is not touched


async def test_a_signal_already_set_raises_without_starting_the_work() -> None:
    signal = InterruptSignal()
    signal.set()
    ran = []

    async def work() -> None:
        ran.append(True)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited"
        with pytest.raises(Interrupted):
            await signal.race(work())
    assert ran == []


async def test_work_that_swallows_the_cancellation_keeps_its_result() -> None:
    signal = InterruptSignal()

    async def stubborn() -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            return "finished anyway"
        return "slept"

    asyncio.get_running_loop().call_later(0.05, signal.set)
    assert await signal.race(stubborn()) == "finished anyway"
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_what_the_work_makes_of_the_cancellation_is_still_an_interrupt() -> None:
    """A workflow's activity answers a cancellation with its own error (ActivityError)."""
    signal = InterruptSignal()

    class WorkCancelled(Exception):
        pass

    async def activity() -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            raise WorkCancelled("activity cancelled") from None
        return "slept"

    asyncio.get_running_loop().call_later(0.05, signal.set)
    with pytest.raises(Interrupted):
        await signal.race(activity())
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
