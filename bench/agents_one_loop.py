"""Many agents on one event loop while one plugin hook blocks (the engine never blocks).

N agents run a tool loop concurrently with `arun_conversation` on a single asyncio loop,
against the scripted provider in its own process. Agent 0 has a `pre_tool_call` guard that
blocks its thread until every other agent has finished (at most `--hook-limit` seconds). If
anything blocking ran on the loop (hooks, store writes, approvals), the others could not
finish while it blocks and the guard would time out; the bench says which happened, with the
wall time, turn-time percentiles, CPU, threads and peak memory.

    python bench/agents_one_loop.py --agents 200 --steps 5
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ProviderProcess, tool_loop_plan

from talaria import Agent, tool


@tool
def noop(n: int) -> str:
    """Do nothing and say ok.

    Args:
        n: any number
    """
    return "ok"


class BlockingGuard:
    """A plugin whose first guard call blocks its thread until the other agents are done,
    as a stuck policy server would."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.others_done = threading.Event()
        self.outlived_others: bool | None = None

    def register(self, hooks: Any) -> None:
        hooks.register("pre_tool_call", self.guard)

    def guard(self, **kwargs: Any) -> None:
        if self.outlived_others is None:
            self.outlived_others = self.others_done.wait(self.limit)


async def run(args: argparse.Namespace, url: str, home: Path) -> dict[str, Any]:
    guard = BlockingGuard(args.hook_limit)

    def make(index: int) -> Agent:
        return Agent(
            model="scripted-model",
            base_url=url,
            api_key="bench",
            home=home / f"a{index}",
            cwd=home,
            tools=[noop],
            toolsets=[],
            plugins=[guard] if index == 0 else [],
            config={"context.engine": "none", "memory.enabled": False},
        )

    agents = [make(i) for i in range(args.agents)]
    finished = 0

    async def one(agent: Agent) -> float:
        nonlocal finished
        started = time.monotonic()
        result = await agent.arun_conversation(user_message="go")
        if result["api_calls"] != args.steps:
            raise RuntimeError(f"a turn made {result['api_calls']} calls: {result.get('error')}")
        took = time.monotonic() - started
        if agent is not agents[0]:
            finished += 1
            if finished == len(agents) - 1:
                guard.others_done.set()
        await agent.aclose()
        return took

    cpu0 = time.process_time()
    start = time.monotonic()
    durations = await asyncio.gather(*(one(agent) for agent in agents))
    wall = time.monotonic() - start
    return {
        "wall_s": wall,
        "cpu_s": time.process_time() - cpu0,
        "p50_s": statistics.median(durations),
        "p95_s": sorted(durations)[int(0.95 * (len(durations) - 1))],
        "others_finished_while_hook_blocked": bool(guard.outlived_others),
        "threads": threading.active_count(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--steps", type=int, default=5, help="model calls per turn")
    parser.add_argument("--hook-limit", type=float, default=600.0)
    args = parser.parse_args()
    with (
        ProviderProcess(tool_loop_plan(args.steps)) as provider,
        tempfile.TemporaryDirectory() as tmp,
    ):
        figures = asyncio.run(run(args, provider.url, Path(tmp)))
    print(
        f"{args.agents} agents x {args.steps} model calls on one event loop, agent 0's hook "
        "blocked until the others finished"
    )
    for name, value in figures.items():
        print(f"  {name:34} {value:.2f}" if isinstance(value, float) else f"  {name:34} {value}")
    if not figures["others_finished_while_hook_blocked"]:
        raise SystemExit("BLOCKED: the other agents could not finish while one hook blocked")


if __name__ == "__main__":
    main()
