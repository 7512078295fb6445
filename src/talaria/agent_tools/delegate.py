"""`delegate_task`: child agents with an isolated context and budgets of their own.

A child sees only its goal and context, gets its own task id, session (stored with the parent's
session as `parent_session_id`) and iteration budget (`delegation.max_iterations`, or its
definition's), and none of the tools that write shared state. It is inline (the default
toolsets, or those the call names) or a named definition (`talaria.agent_tools.subagents`).
At most `delegation.max_concurrent_children` run at once; each ends in exactly one terminal
status: completed | denied | failed | timeout | interrupted. `denied`: it finished, but a call
it needed was refused (by the user, the headless rule or the floor): never a plain success.

Its events reach the parent's front ends as `SubagentEvent`s nested under the delegate_task
call, and its approval and clarify requests are the parent's own requests naming it
(`Interactions.for_subagent`), so whoever answers the parent answers the child.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from talaria.agent_tools.subagents import CHILD_TOOLSETS, Definitions, SubagentDefinition
from talaria.config import Config
from talaria.core import Usage
from talaria.events import Event, SubagentEvent, SubagentOrigin
from talaria.policy.approval import ApprovalState
from talaria.tools.base import Tool, ToolContext, ToolError

if TYPE_CHECKING:
    from talaria.agent_tools.services import AgentServices


class Child(Protocol):
    """What the runner needs of a child agent (built by `talaria.agent.Agent.child`)."""

    session_id: str | None
    approvals: ApprovalState

    def run_conversation(
        self,
        user_message: str,
        system_message: str | None = None,
        conversation_history: Sequence[Mapping[str, Any]] | None = None,
        task_id: str | None = None,
    ) -> dict[str, Any]: ...

    def subscribe(
        self, listener: Callable[[Event], None], answers: Sequence[str] = ()
    ) -> Callable[[], None]: ...

    def interrupt(
        self, message: str | None = None, *, turn_id: str | None = None, reason: str | None = None
    ) -> None: ...

    def close(self) -> None: ...


MAX_TASKS = 10

CHILD_SYSTEM_PROMPT = (
    "You are a focused sub-agent working for another agent. You see only the goal and context "
    "below, not the wider conversation. Work autonomously with your tools. Finish with a "
    "concise report of what you did, what you found, and anything left undone: that report "
    "is all the other agent will see."
)


@dataclass(frozen=True, slots=True)
class ChildPlan:
    """What one child is: a definition's choices, or an inline task's toolsets."""

    agent: str = ""
    """The definition's name ("" inline)."""
    toolsets: tuple[str, ...] = CHILD_TOOLSETS
    tools: frozenset[str] | None = None
    model: str | None = None
    max_iterations: int | None = None
    ask_user: bool = True
    """Its approval and clarify requests go to the parent's front ends (else: denied)."""
    system_prompt: str = CHILD_SYSTEM_PROMPT

    @classmethod
    def of(cls, definition: SubagentDefinition) -> ChildPlan:
        return cls(
            agent=definition.name,
            toolsets=definition.toolsets,
            tools=definition.tools,
            model=definition.model,
            max_iterations=definition.max_iterations,
            ask_user=definition.approvals == "ask",
            system_prompt=definition.prompt or CHILD_SYSTEM_PROMPT,
        )


SpawnChild = Callable[[str, ChildPlan, SubagentOrigin], Child]
"""(parent session id, plan, where it nests) -> a new child agent."""


@dataclass(frozen=True, slots=True)
class ChildTask:
    """One task of a delegate_task call, as its child will run it."""

    goal: str
    context: str
    plan: ChildPlan


class ChildRunner:
    """Runs children for one parent agent (depth limit 1: children get no runner)."""

    def __init__(
        self,
        config: Config,
        spawn: SpawnChild,
        add_usage: Callable[[Usage], None],
        definitions: Definitions | None = None,
    ) -> None:
        self.config = config
        self.spawn = spawn
        self.add_usage = add_usage
        self.definitions = definitions or Definitions({})

    def plan(self, agent: str | None, toolsets: list[str] | None) -> ChildPlan:
        """The plan for a task naming `agent` or inline `toolsets` (ToolError: what to fix)."""
        if agent:
            definition = self.definitions.agents.get(agent)
            if definition is None:
                known = ", ".join(sorted(self.definitions.agents)) or "none"
                raise ToolError(f"no sub-agent named {agent!r}; available: {known}")
            if toolsets is not None:
                raise ToolError(f"{agent!r} has its own tools; give toolsets only inline")
            return ChildPlan.of(definition)
        # inline: the schema allows only TOOLSETS_FOR_CHILDREN
        return ChildPlan() if toolsets is None else ChildPlan(toolsets=tuple(toolsets))

    def tool(self) -> Tool:
        """`delegate_task` as this agent offers it: its named sub-agents in the description."""
        if not self.definitions.agents:
            return DELEGATE_TOOL
        listing = "\n".join(
            f"- {d.name}: {d.description}"
            for d in sorted(self.definitions.agents.values(), key=lambda d: d.name)
        )
        description = f"{DELEGATE_TOOL.description}\n\nNamed sub-agents (give 'agent'):\n"
        return replace(DELEGATE_TOOL, description=description + listing)

    def run(self, tasks: list[ChildTask], ctx: ToolContext[AgentServices]) -> list[dict[str, Any]]:
        config = self.config
        width = max(1, int(config.delegation.max_concurrent_children))
        timeout = float(config.delegation.timeout)
        origins = [
            SubagentOrigin(ctx.call_id, task.plan.agent, index, task.goal)
            for index, task in enumerate(tasks)
        ]
        children = [
            self.spawn(ctx.session_id, task.plan, origin)
            for task, origin in zip(tasks, origins, strict=True)
        ]
        unsubscribe = [
            child.subscribe(_nested(ctx, origin))
            for child, origin in zip(children, origins, strict=True)
        ]
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
                entry = future.result()
            else:
                entry = _ended_early(index, tasks[index], status or "interrupted", child)
            results.append(_with_denials(entry, child))
        pool.shutdown(wait=False, cancel_futures=True)
        for stop in unsubscribe:
            stop()
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


TOOLSETS_FOR_CHILDREN = ("terminal", "file", "clarify", "todo", "session_search", "web")
"""What an inline task may name: not delegation or memory (`subagents.NOT_FOR_CHILDREN`)."""


def _nested(ctx: ToolContext[Any], origin: SubagentOrigin) -> Callable[[Event], None]:
    """A child's listener: its events, wrapped, on the parent's stream."""

    def forward(event: Event) -> None:
        ctx.emit(SubagentEvent(origin, event))

    return forward


def _run_child(child: Child, task: ChildTask, parent_task: str, index: int) -> dict[str, Any]:
    message = f"Goal:\n{task.goal}" + (f"\n\nContext:\n{task.context}" if task.context else "")
    try:
        result = child.run_conversation(
            user_message=message,
            system_message=task.plan.system_prompt,
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
    entry = _entry(index, task, status, child.session_id)
    entry.update(
        summary=result.get("final_response") or "",
        api_calls=result["api_calls"],
        usage=result["usage"],
        session_id=result["session_id"],
        exit_reason=result["turn_exit_reason"],
    )
    if result.get("error"):
        entry["error"] = result["error"]
    return entry


def _entry(index: int, task: ChildTask, status: str, session_id: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"task_index": index, "goal": task.goal}
    if task.plan.agent:
        entry["agent"] = task.plan.agent
    entry.update(
        status=status, summary="", api_calls=0, usage=Usage().to_dict(), session_id=session_id
    )
    return entry


def _ended_early(
    index: int, task: ChildTask, status: str, child: Child, error: str | None = None
) -> dict[str, Any]:
    entry = _entry(index, task, status, child.session_id)
    if error:
        entry["error"] = error
    return entry


def _with_denials(entry: dict[str, Any], child: Child) -> dict[str, Any]:
    """A child that was refused a call says so, first thing: `denied` status (when it
    otherwise completed) and what was refused, as the child was told."""
    denials = list(child.approvals.denials)
    if not denials:
        return entry
    if entry["status"] == "completed":
        entry["status"] = "denied"
    entry["denied"] = [
        {"tool": d.tool_name, "command": d.command, "message": d.message} for d in denials
    ]
    return entry


def _delegate(
    ctx: ToolContext[AgentServices],
    goal: str | None = None,
    context: str | None = None,
    tasks: list[dict[str, Any]] | None = None,
    agent: str | None = None,
    toolsets: list[str] | None = None,
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
        plan = runner.plan(item.get("agent", agent), item.get("toolsets", toolsets))
        cleaned.append(ChildTask(item_goal, str(item.get("context") or ""), plan))
    return {"results": runner.run(cleaned, ctx)}


_TASK_FIELDS: dict[str, Any] = {
    "goal": {"type": "string", "description": "What the sub-agent must achieve."},
    "context": {
        "type": "string",
        "description": "Everything it needs to know: files, constraints, findings so far.",
    },
    "agent": {
        "type": "string",
        "description": "Run a named sub-agent (listed in this description).",
    },
    "toolsets": {
        "type": "array",
        "items": {"type": "string", "enum": list(TOOLSETS_FOR_CHILDREN)},
        "description": "For a sub-agent without a name: the only toolsets it gets.",
    },
}

DELEGATE_TOOL = Tool(
    name="delegate_task",
    description=(
        "Hand independent sub-tasks to sub-agents that work in parallel with their own tools and "
        "budgets. They see only the goal and context you give them. Give either one goal (with "
        "optional context) or a list of tasks. A sub-agent refused a tool call it needed ends "
        "with status 'denied' and says what was refused."
    ),
    parameters={
        "type": "object",
        "properties": {
            **_TASK_FIELDS,
            "tasks": {
                "type": "array",
                "description": "Several independent tasks to run in parallel.",
                "items": {"type": "object", "properties": _TASK_FIELDS, "required": ["goal"]},
            },
        },
        "additionalProperties": False,
    },
    handler=_delegate,
    toolset="delegation",
    context_param="ctx",
)
