"""`delegate_task`: child agents with an isolated context and budgets of their own.

A child sees only its goal and context, gets its own task id, session (stored with the parent's
session as `parent_session_id`) and iteration budget (`delegation.max_iterations`), and none of
the tools that need a human or write shared state. At most `delegation.max_concurrent_children`
run at once; each ends in exactly one terminal status: completed | failed | timeout | interrupted.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from talaria.config import Config
from talaria.core import Usage
from talaria.tools.base import Tool, ToolContext, ToolError

if TYPE_CHECKING:
    from talaria.agent_tools.services import AgentServices


class Child(Protocol):
    """What the runner needs of a child agent (built by `talaria.agent.Agent.child`)."""

    session_id: str | None

    def run_conversation(
        self,
        user_message: str,
        system_message: str | None = None,
        conversation_history: Sequence[Mapping[str, Any]] | None = None,
        task_id: str | None = None,
    ) -> dict[str, Any]: ...

    def interrupt(
        self, message: str | None = None, *, turn_id: str | None = None, reason: str | None = None
    ) -> None: ...

    def close(self) -> None: ...


SpawnChild = Callable[[str, list[str]], Child]
"""(parent session id, toolsets) -> a new child agent."""

CHILD_TOOLSETS = ("terminal", "file", "todo", "session_search")
MAX_TASKS = 10

CHILD_SYSTEM_PROMPT = (
    "You are a focused sub-agent working for another agent. You see only the goal and context "
    "below, not the wider conversation. Work autonomously with your tools; you cannot ask the "
    "user questions. Finish with a concise report of what you did, what you found, and anything "
    "left undone: that report is all the other agent will see."
)


class ChildRunner:
    """Runs children for one parent agent (depth limit 1: children get no runner)."""

    def __init__(
        self, config: Config, spawn: SpawnChild, add_usage: Callable[[Usage], None]
    ) -> None:
        self.config = config
        self.spawn = spawn
        self.add_usage = add_usage

    def run(
        self, tasks: list[dict[str, str]], ctx: ToolContext[AgentServices]
    ) -> list[dict[str, Any]]:
        config = self.config
        width = max(1, int(config.delegation.max_concurrent_children))
        timeout = float(config.delegation.timeout)
        children = [self.spawn(ctx.session_id, list(CHILD_TOOLSETS)) for _ in tasks]
        pool = concurrent.futures.ThreadPoolExecutor(width, thread_name_prefix="talaria-child")
        futures = [  # each child runs in this call's context: it nests in its trace and budget
            pool.submit(contextvars.copy_context().run, _run_child, child, task, ctx.task_id, index)
            for index, (child, task) in enumerate(zip(children, tasks, strict=True))
        ]
        deadline = time.monotonic() + timeout
        statuses = self._watch(futures, children, ctx.interrupt, deadline)
        results = []
        for index, (future, child) in enumerate(zip(futures, children, strict=True)):
            status = statuses[index]
            if future.done() and not future.cancelled() and status is None:
                results.append(future.result())
            else:
                results.append(_ended_early(index, tasks[index], status or "interrupted", child))
        pool.shutdown(wait=False, cancel_futures=True)
        for result in results:
            self.add_usage(Usage.from_dict(result.get("usage", {})))
        return results

    def _watch(
        self,
        futures: list[concurrent.futures.Future[dict[str, Any]]],
        children: list[Child],
        interrupt: threading.Event,
        deadline: float,
    ) -> list[str | None]:
        """Wait for the children; stop the rest on a parent interrupt or at the deadline."""
        statuses: list[str | None] = [None] * len(futures)
        while not all(f.done() for f in futures):
            reason = (
                "interrupted"
                if interrupt.is_set()
                else ("timeout" if time.monotonic() >= deadline else None)
            )
            if reason:
                for index, future in enumerate(futures):
                    if not future.done():
                        statuses[index] = reason
                        children[index].interrupt(reason=f"parent {reason}")
                concurrent.futures.wait(futures, timeout=5)
                break
            concurrent.futures.wait(futures, timeout=0.1)
        return statuses


def _run_child(child: Child, task: dict[str, str], parent_task: str, index: int) -> dict[str, Any]:
    goal = task["goal"]
    context = task.get("context") or ""
    message = f"Goal:\n{goal}" + (f"\n\nContext:\n{context}" if context else "")
    try:
        result = child.run_conversation(
            user_message=message,
            system_message=CHILD_SYSTEM_PROMPT,
            task_id=f"{parent_task}.child{index + 1}",
        )
    except Exception as exc:
        return _ended_early(index, task, "failed", child, error=f"{type(exc).__name__}: {exc}")
    finally:
        child.close()  # its connections, threads and background processes; not the shared store
    status = (
        "completed"
        if result["completed"]
        else ("interrupted" if result["interrupted"] else "failed")
    )
    entry: dict[str, Any] = {
        "task_index": index,
        "goal": goal,
        "status": status,
        "summary": result.get("final_response") or "",
        "api_calls": result["api_calls"],
        "usage": result["usage"],
        "session_id": result["session_id"],
        "exit_reason": result["turn_exit_reason"],
    }
    if result.get("error"):
        entry["error"] = result["error"]
    return entry


def _ended_early(
    index: int, task: dict[str, str], status: str, child: Child, error: str | None = None
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "task_index": index,
        "goal": task["goal"],
        "status": status,
        "summary": "",
        "api_calls": 0,
        "usage": Usage().to_dict(),
        "session_id": child.session_id,
    }
    if error:
        entry["error"] = error
    return entry


def _delegate(
    ctx: ToolContext[AgentServices],
    goal: str | None = None,
    context: str | None = None,
    tasks: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    runner = ctx.services.delegate
    if runner is None:
        raise ToolError("delegation is not available here (sub-agents cannot delegate further)")
    items = tasks if tasks else [{"goal": goal, "context": context}]
    if len(items) > MAX_TASKS:
        raise ToolError(f"at most {MAX_TASKS} tasks per call; got {len(items)}")
    cleaned = []
    for number, item in enumerate(items, start=1):
        item_goal = (item.get("goal") or "").strip() if isinstance(item, dict) else ""
        if not item_goal:
            raise ToolError(f"task {number} has no goal; give each task a 'goal'")
        cleaned.append({"goal": item_goal, "context": str(item.get("context") or "")})
    return {"results": runner.run(cleaned, ctx)}


DELEGATE_TOOL = Tool(
    name="delegate_task",
    description=(
        "Hand independent sub-tasks to sub-agents that work in parallel with their own tools and "
        "budgets. They see only the goal and context you give them and cannot ask the user "
        "anything. Give either one goal (with optional context) or a list of tasks."
    ),
    parameters={
        "type": "object",
        "properties": {
            "goal": {"type": "string", "description": "What the sub-agent must achieve."},
            "context": {
                "type": "string",
                "description": "Everything it needs to know: files, constraints, findings so far.",
            },
            "tasks": {
                "type": "array",
                "description": "Several independent tasks to run in parallel.",
                "items": {
                    "type": "object",
                    "properties": {
                        "goal": {"type": "string"},
                        "context": {"type": "string"},
                    },
                    "required": ["goal"],
                },
            },
        },
        "additionalProperties": False,
    },
    handler=_delegate,
    toolset="delegation",
    context_param="ctx",
)
