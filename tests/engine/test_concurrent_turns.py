"""Turns of many agents on one event loop make progress while one agent's plugin hook blocks its
thread."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from helpers import add
from talaria import Agent
from talaria.testing import ScriptedModel, call, text


def test_concurrent_turns_on_one_loop_progress_while_a_hook_sleeps(tmp_path: Path) -> None:
    import asyncio

    slow_started = threading.Event()
    fast_done = threading.Event()

    class SlowGuard:
        def register(self, hooks: Any) -> None:
            hooks.register("pre_tool_call", self.guard)

        def guard(self, **kwargs: Any) -> None:
            slow_started.set()
            fast_done.wait(60)  # held until the other turns finished, if they can meanwhile

    finished: list[str] = []

    async def main() -> None:
        slow = Agent(
            model=ScriptedModel([call("add", {"a": 1, "b": 1}), text("slow done")]),
            home=tmp_path / "slow",
            tools=[add],
            toolsets=[],
            plugins=[SlowGuard()],
            config={"context.engine": "none"},
        )
        fast = [
            Agent(
                model=ScriptedModel([call("add", {"a": n, "b": 1}), text(f"fast {n}")]),
                home=tmp_path / f"fast{n}",
                tools=[add],
                toolsets=[],
                config={"context.engine": "none"},
            )
            for n in range(5)
        ]

        async def run(agent: Agent, label: str) -> None:
            await agent.achat(label)
            finished.append(label)
            await agent.aclose()

        slow_task = asyncio.create_task(run(slow, "slow"))
        await asyncio.to_thread(slow_started.wait, 10)
        await asyncio.gather(*(run(agent, f"fast{n}") for n, agent in enumerate(fast)))
        fast_done.set()
        await slow_task

    asyncio.run(main())
    assert finished[-1] == "slow" and len(finished) == 6
