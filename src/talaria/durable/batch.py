"""`talaria batch --temporal`: every task is one durable turn on the cluster.

The batch process only starts turns (at most `concurrency` at once), waits for their results
and writes the results file. Each task's workflow id comes from the results file and the task
id, so a batch process that is killed and started again attaches to the turns still running
(or already finished) on the cluster instead of running them twice.
"""

from __future__ import annotations

import hashlib
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from talaria.batch.local import BatchSummary, OnDone, drain
from talaria.batch.tasks import BatchTask, ResultsFile, failure_line, result_line
from talaria.durable.protocol import AGENT_OVERRIDES, TurnInput
from talaria.durable.workflow import TurnWorkflow


def workflow_id(results: ResultsFile, task: BatchTask) -> str:
    batch = hashlib.sha256(str(results.path.resolve()).encode()).hexdigest()[:12]
    return f"talaria-batch-{batch}-{task.id}"


async def run_on_temporal(
    client: Client,
    task_queue: str,
    tasks: list[BatchTask],
    results: ResultsFile,
    *,
    concurrency: int,
    agent_options: dict[str, Any],
    on_done: OnDone | None = None,
) -> BatchSummary:
    """Run every task the results file does not hold yet, `concurrency` turns at a time.
    Model and tool settings come from the workers; `agent_options` and each task may
    override the model, provider, base_url, api_mode, toolsets and max_turns."""
    defaults = {k: agent_options.get(k) for k in AGENT_OVERRIDES if agent_options.get(k)}
    if agent_options.get("max_iterations"):
        defaults["max_turns"] = agent_options["max_iterations"]

    async def run(task: BatchTask) -> dict[str, Any]:
        own = {k: task.options[k] for k in AGENT_OVERRIDES if k in task.options}
        wid = workflow_id(results, task)
        return await _run_task(client, task_queue, task, {**defaults, **own}, wid)

    return await drain(tasks, results, [run] * max(1, concurrency), on_done)


async def _run_task(
    client: Client, task_queue: str, task: BatchTask, overrides: dict[str, Any], wid: str
) -> dict[str, Any]:
    turn = TurnInput(
        user_message=task.prompt,
        system_message=task.options.get("system"),
        agent=overrides,
        deltas=False,
    )
    try:
        handle = await _start_or_attach(client, task_queue, turn, wid)
        return result_line(task, dict(await handle.result()))
    except Exception as exc:
        return failure_line(task, exc)


async def _start_or_attach(
    client: Client, task_queue: str, turn: TurnInput, wid: str
) -> WorkflowHandle[Any, Any]:
    """The task's turn: still running or already finished from an earlier batch process, or
    started now."""
    try:
        return await client.start_workflow(
            TurnWorkflow.run,
            turn,
            id=wid,
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except WorkflowAlreadyStartedError:  # it finished before: its result is still there
        return client.get_workflow_handle_for(TurnWorkflow.run, wid)
