"""What an idle agent costs: N agents each run one tool-loop turn, then sit idle.

After one warm-up agent (so that imports and process-wide pools are not counted), N agents
are built and each runs one turn of `--steps` model calls against the scripted provider in
its own process; they stay referenced, idle. Printed: resident memory added per idle agent,
threads alive, open file descriptors and event loops alive, for `achat` on one event loop
(`--mode async`) or `chat()` from plain code (`--mode sync`). The agents share one home (one
session database, as a server's sessions do) unless `--separate-homes`.

    python bench/idle_agents.py --agents 200 --steps 3 --mode async
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agents_one_loop import noop
from common import ProviderProcess, tool_loop_plan

from talaria import Agent


def rss_kb() -> int:
    """The resident set now (not the peak), from /proc; 0 where there is no /proc."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except OSError:
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE") // 1024


def open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


def loops_alive() -> int:
    return sum(isinstance(o, asyncio.AbstractEventLoop) for o in gc.get_objects())


SEPARATE_HOMES = False


def make_agent(url: str, home: Path, index: int) -> Agent:
    return Agent(
        model="scripted-model",
        base_url=url,
        api_key="bench",
        home=home / f"a{index}" if SEPARATE_HOMES else home,
        cwd=home,
        tools=[noop],
        toolsets=[],
        config={"context.engine": "none", "memory.enabled": False},
    )


def check(result: dict[str, Any], steps: int) -> None:
    if result["api_calls"] != steps:
        raise RuntimeError(f"a turn made {result['api_calls']} calls: {result.get('error')}")


def settle() -> tuple[int, int]:
    """Collect garbage, then (rss in KB, threads alive)."""
    gc.collect()
    return rss_kb(), threading.active_count()


async def run_async(agents: int, steps: int, url: str, home: Path) -> dict[str, Any]:
    warm = make_agent(url, home, -1)
    check(await warm.arun_conversation(user_message="go"), steps)
    rss0, threads0 = settle()
    built = [make_agent(url, home, i) for i in range(agents)]
    results = await asyncio.gather(*(a.arun_conversation(user_message="go") for a in built))
    for result in results:
        check(result, steps)
    figures = measure(agents, rss0, threads0)
    for agent in [warm, *built]:
        await agent.aclose()
    return figures


def run_sync(agents: int, steps: int, url: str, home: Path) -> dict[str, Any]:
    warm = make_agent(url, home, -1)
    check(warm.run_conversation(user_message="go"), steps)
    rss0, threads0 = settle()
    built = [make_agent(url, home, i) for i in range(agents)]
    for agent in built:
        check(agent.run_conversation(user_message="go"), steps)
    figures = measure(agents, rss0, threads0)
    for agent in [warm, *built]:
        agent.close()
    return figures


def measure(agents: int, rss0: int, threads0: int) -> dict[str, Any]:
    rss, threads = settle()
    return {
        "rss_per_idle_agent_kb": round((rss - rss0) / max(1, agents), 1),
        "rss_total_mb": round(rss / 1024, 1),
        "threads_before": threads0,
        "threads_idle": threads,
        "open_fds": open_fds(),
        "event_loops_alive": loops_alive(),
    }


def run(
    agents: int = 100, steps: int = 3, mode: str = "async", separate: bool = False
) -> dict[str, Any]:
    global SEPARATE_HOMES
    SEPARATE_HOMES = separate
    with (
        ProviderProcess(tool_loop_plan(steps)) as provider,
        tempfile.TemporaryDirectory() as tmp,
    ):
        if mode == "async":
            figures = asyncio.run(run_async(agents, steps, provider.url, Path(tmp)))
        else:
            figures = run_sync(agents, steps, provider.url, Path(tmp))
    homes = "separate" if separate else "shared"
    return {"agents": agents, "steps": steps, "mode": mode, "homes": homes, **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--steps", type=int, default=3, help="model calls in the one turn")
    parser.add_argument("--mode", choices=("async", "sync"), default="async")
    parser.add_argument("--separate-homes", action="store_true", help="a database per agent")
    args = parser.parse_args()
    figures = run(args.agents, args.steps, args.mode, args.separate_homes)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
