"""What every side's driver shares: the command protocol and the measurements taken in it.

Each side (talaria, hermes-agent, pydantic-ai, the Agents SDK) has a driver script run by its
own venv's interpreter: `python <side>_driver.py <command> '<json params>'`; the driver prints
one JSON line. This module is stdlib only, because every venv imports it. The commands:

- `loop`: one warm-up turn, then `reps` rounds of one turn per length in `lengths`, each on a
  fresh agent; per turn: wall seconds, CPU seconds, model calls made.
- `sessions`: `sequential` sessions one after another, then `sessions` sessions at once in
  this process, one agent each; wall, CPU, peak threads, peak and idle memory, failures.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

MAX_STEPS = 1000
"""Model calls every side allows per turn (their defaults, 10 to 90, would stop the 150-step
loop early)."""

Turn = Callable[[str], int]
"""Runs one turn on a fresh agent with this user message; returns the model calls it made."""

Many = Callable[[list[str]], list[Any]]
"""Runs one fresh-agent turn per message, all at once; returns each one's model calls, or the
error that ended it (as text)."""


def rss_bytes() -> int:
    """This process's resident memory now."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def os_threads() -> int:
    """Threads of this process as the kernel counts them (native ones included)."""
    return len(os.listdir("/proc/self/task"))


class ThreadPeak:
    """Samples the thread count every 20 ms on its own thread (not counted) while in use."""

    def __init__(self) -> None:
        self.peak = os_threads()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, os_threads() - 1)

    def __enter__(self) -> ThreadPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class TimedTurn:
    steps: int
    seconds: float
    cpu: float
    api_calls: int
    final: str


def timed_turns(turn: Turn, reps: int, lengths: list[int]) -> list[dict[str, Any]]:
    """The `loop` command: a warm-up turn, then `reps` rounds of one turn per length."""
    turn("steps=2")
    turns = []
    for _ in range(reps):
        for length in lengths:
            wall, cpu = time.perf_counter(), time.process_time()
            calls = turn(f"steps={length}")
            turns.append(
                TimedTurn(
                    length, time.perf_counter() - wall, time.process_time() - cpu, calls, "done"
                ).__dict__
            )
    return turns


def sessions(turn: Turn, many: Many, count: int, steps: int, sequential: int) -> dict[str, Any]:
    """The `sessions` command: after a warm-up turn (imports and one-off set-up are not what
    is measured), `sequential` sessions one by one (the CPU per step of one session alone),
    then `count` at once."""
    turn(f"steps={steps}")
    seq_cpu = time.process_time()
    for _ in range(sequential):
        turn(f"steps={steps}")
    seq_cpu = time.process_time() - seq_cpu
    gc.collect()
    rss_before, threads_before = rss_bytes(), os_threads()
    wall, cpu = time.perf_counter(), time.process_time()
    with ThreadPeak() as threads:
        outcomes = many([f"steps={steps} session={i}" for i in range(count)])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    gc.collect()
    return session_figures(
        outcomes,
        count,
        steps,
        {
            "wall_s": wall,
            "cpu_s": cpu,
            "threads_before": threads_before,
            "threads_peak": threads.peak,
            "threads_after": os_threads(),
            "rss_before": rss_before,
            "rss_after": rss_bytes(),
            "peak_rss": peak_rss_bytes(),
            "sequential_sessions": sequential,
            "sequential_cpu_per_step": seq_cpu / (sequential * steps) if sequential else None,
        },
    )


def failure_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


def on_one_loop(
    loop: asyncio.AbstractEventLoop, aturn: Callable[[str], Awaitable[int]]
) -> tuple[Turn, Many]:
    """A coroutine side: single turns and concurrent sessions as tasks of one event loop."""

    async def guarded(message: str) -> int | str:
        try:
            return await aturn(message)
        except Exception as exc:  # a failed session is counted, not fatal
            return failure_text(exc)

    async def gather(messages: list[str]) -> list[Any]:
        return list(await asyncio.gather(*(guarded(m) for m in messages)))

    return (
        lambda message: loop.run_until_complete(aturn(message)),
        lambda messages: loop.run_until_complete(gather(messages)),
    )


def on_threads(turn: Turn) -> Many:
    """A threaded side: one thread per concurrent session (as such a framework's server does)."""
    from concurrent.futures import ThreadPoolExecutor

    def guarded(message: str) -> int | str:
        try:
            return turn(message)
        except Exception as exc:
            return failure_text(exc)

    def many(messages: list[str]) -> list[Any]:
        with ThreadPoolExecutor(max_workers=len(messages)) as pool:
            return list(pool.map(guarded, messages))

    return many


def session_figures(
    outcomes: list[Any], count: int, steps: int, figures: dict[str, Any]
) -> dict[str, Any]:
    """Failures are sessions that raised or made another number of model calls than planned.
    Memory per idle agent: the growth of resident memory over the run, all agents still
    alive and idle, divided by their number (an upper bound: freed garbage counts too)."""
    failures = [o for o in outcomes if o != steps]
    figures.update(
        {
            "sessions": count,
            "steps": steps,
            "model_calls": sum(o for o in outcomes if o == steps),
            "failures": len(failures),
            "failure_examples": [str(f) for f in failures[:3]],
            "cpu_per_step": figures["cpu_s"] / (count * steps),
            "idle_bytes_per_agent": (figures["rss_after"] - figures["rss_before"]) / count,
        }
    )
    return figures


class Side:
    """A coroutine side: `turn` builds a fresh agent, runs one turn, returns its model calls.
    With `keep` the agents stay alive (idle) after their turn, until `close`."""

    def __init__(self, params: dict[str, Any], keep: bool) -> None:
        self.url, self.home, self.keep = params["url"], params["home"], keep
        self.alive: list[Any] = []

    async def turn(self, message: str) -> int:
        raise NotImplementedError

    def kept(self, agent: Any) -> None:
        if self.keep:
            self.alive.append(agent)

    async def close(self) -> None:
        """Close kept agents that have an `aclose`."""
        for agent in self.alive:
            if hasattr(agent, "aclose"):
                await agent.aclose()


def coroutine_commands(side: type[Side]) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
    """The `loop` and `sessions` commands for a coroutine side, on one event loop."""

    def run(params: dict[str, Any], keep: bool, measure: Callable[[Turn, Many], Any]) -> Any:
        loop = asyncio.new_event_loop()
        try:
            one = side(params, keep)
            answer = measure(*on_one_loop(loop, one.turn))
            loop.run_until_complete(one.close())
            return answer
        finally:
            loop.close()

    def loop_command(params: dict[str, Any]) -> dict[str, Any]:
        return {
            "turns": run(
                params,
                False,
                lambda turn, _: timed_turns(turn, int(params["reps"]), params["lengths"]),
            )
        }

    def sessions_command(params: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = run(
            params,
            True,
            lambda turn, many: sessions(
                turn, many, int(params["sessions"]), int(params["steps"]), int(params["sequential"])
            ),
        )
        return result

    return {"loop": loop_command, "sessions": sessions_command}


def main(commands: dict[str, Callable[[dict[str, Any]], dict[str, Any]]]) -> None:
    """Run the command named on the command line in a fresh temporary home and working
    directory; print its JSON answer as the last line."""
    command, params = sys.argv[1], json.loads(sys.argv[2])
    with tempfile.TemporaryDirectory(prefix="bench-side-", ignore_cleanup_errors=True) as home:
        params["home"] = home
        os.chdir(home)
        answer = commands[command](params)
        os.chdir(tempfile.gettempdir())
    sys.stdout.write("\n" + json.dumps(answer) + "\n")
    sys.stdout.flush()
