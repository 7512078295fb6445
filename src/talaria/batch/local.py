"""Run a batch in this process: N tasks at a time on one event loop, one session per task.

Tasks share one session store (and, with PostgreSQL, one connection pool); each gets its own
`Agent`, driven with `arun_conversation`, so N concurrent tasks cost N coroutines, not N
threads. A task that cannot even start (bad model name, unreachable endpoint) becomes a failed
result line; it never stops the batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from talaria.batch.tasks import BatchTask, ResultsFile, failure_line, result_line

OnDone = Callable[[BatchTask, dict[str, Any]], None]


@dataclass
class BatchSummary:
    total: int
    skipped: int = 0
    completed: int = 0
    failed: int = 0

    def count(self, line: dict[str, Any]) -> None:
        if line.get("completed"):
            self.completed += 1
        else:
            self.failed += 1

    def text(self, results: ResultsFile) -> str:
        return (
            f"{self.total} tasks: {self.completed} completed, {self.failed} not completed, "
            f"{self.skipped} already done; results in {results.path}"
        )


def pending(tasks: list[BatchTask], results: ResultsFile) -> list[BatchTask]:
    """The tasks the results file does not hold yet."""
    return [task for task in tasks if task.id not in results.done]


RunTask = Callable[[BatchTask], Awaitable[dict[str, Any]]]


async def drain(
    tasks: list[BatchTask],
    results: ResultsFile,
    runners: list[RunTask],
    on_done: OnDone | None = None,
) -> BatchSummary:
    """Run the tasks the results file lacks, one runner per concurrent slot, writing each
    result line as its task ends (the local and the Temporal batch share this)."""
    todo = pending(tasks, results)
    summary = BatchSummary(total=len(tasks), skipped=len(tasks) - len(todo))
    queue = iter(todo)

    async def slot(run: RunTask) -> None:
        for task in queue:  # one shared iterator: each task goes to exactly one slot
            line = await run(task)
            results.write(line)
            summary.count(line)
            if on_done is not None:
                on_done(task, line)

    await asyncio.gather(*(slot(run) for run in runners[: max(1, len(todo))]))
    return summary


def agent_arguments(defaults: dict[str, Any], task: BatchTask) -> dict[str, Any]:
    """Agent(...) keywords for one task: the batch's defaults, then the task's own overrides."""
    kwargs = dict(defaults)
    for key in ("model", "provider", "base_url", "api_mode", "toolsets"):
        if key in task.options:
            kwargs[key] = task.options[key]
    if "max_turns" in task.options:
        kwargs["max_iterations"] = task.options["max_turns"]
    return kwargs


async def run_local(
    tasks: list[BatchTask],
    results: ResultsFile,
    *,
    concurrency: int,
    agent_options: dict[str, Any],
    on_done: OnDone | None = None,
) -> BatchSummary:
    """Run every task the results file does not hold yet, `concurrency` at a time."""
    from talaria.config import Config
    from talaria.store.factory import configured_store

    config = Config.load(agent_options.get("home"), overrides=agent_options.get("config"))
    store = configured_store(config)
    pools = [_AgentPool({**agent_options, "store": store}) for _ in range(max(1, concurrency))]
    try:
        return await drain(tasks, results, [pool.run for pool in pools], on_done)
    finally:
        for pool in pools:
            await pool.aclose()
        store.close()


class _AgentPool:
    """One worker's agents, one per distinct set of task options, each reused for task after
    task with a fresh session: the model client, tools and plugins are built once per worker,
    not once per task (an SDK client alone costs ~0.1 s of CPU)."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self.agents: dict[str, Any] = {}

    async def run(self, task: BatchTask) -> dict[str, Any]:
        from talaria.agent import Agent

        kwargs = agent_arguments(self.options, task)
        key = repr(sorted((k, repr(v)) for k, v in kwargs.items() if k != "store"))
        try:
            agent = self.agents.get(key) or Agent(**kwargs)
        except Exception as exc:
            return failure_line(task, exc)
        self.agents[key] = agent
        agent.new_session()
        try:
            result = await agent.arun_conversation(
                user_message=task.prompt, system_message=task.options.get("system")
            )
            return result_line(task, result)
        except Exception as exc:
            return failure_line(task, exc)

    async def aclose(self) -> None:
        for agent in self.agents.values():
            await agent.aclose()
