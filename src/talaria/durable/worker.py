"""`talaria worker`: a Temporal worker that runs durable turns with this machine's settings.

Start as many as you like on one task queue (on one host or many; with several hosts, point
them at one PostgreSQL store with `store.url`). Each runs the turn workflow and its
activities; a killed worker's activities move to the others after the heartbeat timeout.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from talaria.durable.activities import TurnActivities, WorkerAgents
from talaria.durable.workflow import TurnWorkflow

PASSTHROUGH = (
    "talaria", "genai_prices", "pydantic", "pydantic_core", "yaml", "httpx", "opentelemetry",
)  # fmt: skip
"""Modules the workflow uses but need not re-import per run: talaria's loop is free of side
effects at import, and these are its (pure) dependencies."""


def build_worker(
    client: Client,
    task_queue: str,
    agents: WorkerAgents,
    *,
    max_concurrent_activities: int = 100,
) -> Worker:
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[TurnWorkflow],
        activities=TurnActivities(agents).all(),
        workflow_runner=SandboxedWorkflowRunner(restrictions=restrictions),
        max_concurrent_activities=max_concurrent_activities,
        # a turn whose worker died moves to another one within seconds, not the default 10 s
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=3),
        graceful_shutdown_timeout=timedelta(seconds=5),
    )


async def run_worker(
    target: str,
    task_queue: str,
    agent_options: dict[str, Any],
    *,
    namespace: str = "default",
    stop: asyncio.Event | None = None,
    ready: asyncio.Event | None = None,
    max_concurrent_activities: int = 100,
) -> None:
    """Serve turns until `stop` is set (or forever)."""
    from talaria.durable.client import connect

    agents = WorkerAgents({**agent_options, "source": agent_options.get("source", "temporal")})
    try:
        agents.warm_up()
        client = await connect(target, namespace, traced=agents.traced)  # its workers trace too
        async with build_worker(
            client, task_queue, agents, max_concurrent_activities=max_concurrent_activities
        ):
            if ready is not None:
                ready.set()
            await (stop or asyncio.Event()).wait()
    finally:
        await agents.aclose()
