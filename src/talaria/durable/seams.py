"""The loop's seams, as the turn workflow fills them: each model call and each tool call is an
activity, the store is a queue saved by an activity, events go into a log clients can query.

`run_turn` itself is unchanged: it sees a `ModelClient`, a `ToolExecutor`, a store and an
interrupt signal as it does in-process. Only deterministic work happens here; everything that
touches the world happens on a worker, inside an activity.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy as ActivityRetry

from talaria.core import Message, ModelRequest, ModelResponse, StreamHandler, ToolCall
from talaria.durable.protocol import (
    ModelCallInput,
    ToolCallInput,
    ToolCallOutput,
    Unsaved,
    error_from_dict,
    event_to_dict,
    payload_messages,
    request_to_dict,
    response_from_dict,
)
from talaria.events import Event, RequestResolved, RequestWithdrawn
from talaria.interaction import Interactions, normalise_answer
from talaria.interrupt import InterruptSignal, RaceEntry
from talaria.loop.session import SessionHandle
from talaria.loop.stream import STEP_SEPARATOR
from talaria.plugins.hooks import HookBus
from talaria.policy.approval import ApprovalState
from talaria.providers.base import NullStream
from talaria.tools.base import Tool, ToolContext
from talaria.tools.executor import CallOutcome, ToolExecutor

INFRA_RETRY = ActivityRetry(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_attempts=20
)
"""Temporal retries an activity only when its worker failed (a crash, a lost heartbeat):
provider errors come back as data and talaria's own retry policy handles them."""


@dataclass
class ActivityTimeouts:
    heartbeat: float
    model_call: float
    tool_default: float
    request: float
    """How long an approval or clarify question waits for an answer."""

    def options(self, seconds: float, *, heartbeat: bool = True) -> dict[str, Any]:
        """Activity options; calls that can run long heartbeat, short store writes do not."""
        options: dict[str, Any] = {
            "start_to_close_timeout": timedelta(seconds=seconds),
            "retry_policy": INFRA_RETRY,
        }
        if heartbeat:
            options["heartbeat_timeout"] = timedelta(seconds=self.heartbeat)
        return options


class EventLog:
    """Every event of the turn in order, as dicts; clients read it with a query."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event_to_dict(event))

    def extend(self, events: list[dict[str, Any]]) -> None:
        self.events.extend(events)


class WorkflowInterrupt(InterruptSignal):
    """The interrupt signal on the workflow's event loop, which has no thread-safe callbacks:
    a signal handler runs on that loop, so a race is fired directly."""

    def _fire_soon(self, race: RaceEntry) -> None:
        race.fire()


@dataclass
class QueuedSession(SessionHandle):
    """The session as the loop sees it; appends queue up here instead of going to a store,
    and the next activity that writes (the next model call, or the end of the turn) saves
    them first: the workflow itself does no I/O."""

    queued: list[tuple[int, Message]] = field(default_factory=list)

    async def flush(self) -> None:
        if self.unsaved == 0:
            return
        pending = self.history[len(self.history) - self.unsaved :]
        self.queued.extend(enumerate(pending, start=self.next_seq))
        self.next_seq += len(pending)
        self.unsaved = 0

    def take(self) -> Unsaved | None:
        if not self.queued:
            return None
        items, self.queued = self.queued, []
        return Unsaved(items[0][0], payload_messages([message for _, message in items]))


@dataclass
class TurnScope:
    """What every activity of one turn needs to know about it."""

    task_id: str
    writer: str
    agent: dict[str, Any]
    answers: bool
    deltas: bool
    timeouts: ActivityTimeouts
    session: QueuedSession
    log: EventLog
    spoken: bool = False
    """A step of the turn answered with text: the next one's stream starts with the step
    separator, as `loop.stream.EventStream` does in process."""

    @property
    def session_id(self) -> str:
        """The session the turn writes to now (a compression continues it in a child)."""
        return self.session.id


class ActivityModelClient:
    """A `ModelClient` whose call is the `model_call` activity on a worker (entry `index` of the
    worker's chain). The activity saves the queued messages first (nothing lost,
    docs/architecture.md)."""

    def __init__(self, scope: TurnScope, index: int, entry: dict[str, str]) -> None:
        self.scope = scope
        self.index = index
        self.provider = entry["provider"]
        self.model = entry["model"]
        self.api_mode = entry["api_mode"]
        self.base_url = entry["base_url"]

    async def complete(self, request: ModelRequest, stream: StreamHandler) -> ModelResponse:
        scope = self.scope
        outcome = await workflow.execute_activity(
            "model_call",
            ModelCallInput(
                scope.session_id,
                scope.task_id,
                self.index,
                request_to_dict(request),
                scope.agent,
                unsaved=scope.session.take(),
                writer=scope.writer,
                deltas=scope.deltas,
                separator=STEP_SEPARATOR if scope.spoken else "",
            ),
            result_type=dict,
            **scope.timeouts.options(scope.timeouts.model_call),
        )
        if outcome.get("error"):
            raise error_from_dict(outcome["error"])
        response = response_from_dict(outcome["response"])
        if response.text and not isinstance(stream, NullStream):  # a step, not a side task
            scope.spoken = True
        return response

    async def aclose(self) -> None:
        pass


@dataclass
class PendingRequests:
    """Approvals and clarify questions waiting for a client's answer (the `respond` update).
    The request events are the engine's own; their ids come from the call id, so a replayed
    workflow asks under the same ids."""

    log: EventLog
    timeout: float
    answers: dict[str, str] = field(default_factory=dict)
    open: dict[str, dict[str, Any]] = field(default_factory=dict)

    def respond(self, request_id: str, answer: object) -> bool:
        """False when the request is not (or no longer) waiting, as `agent.respond` says;
        ValueError for an approval answer that is not a decision."""
        request = self.open.get(request_id)
        if request is None or request_id in self.answers:
            return False
        self.answers[request_id] = normalise_answer(request["kind"], answer)
        return True

    async def ask(self, request: dict[str, Any]) -> str | None:
        """The answer, or None when none came within the timeout."""
        request_id, kind = request["request_id"], request["kind"]
        self.open[request_id] = request
        self.log.extend([request])
        reason = "timeout"
        try:
            await workflow.wait_condition(lambda: request_id in self.answers, timeout=self.timeout)
            answer = self.answers[request_id]
            self.log(RequestResolved(request_id, kind, answer))
            return answer
        except TimeoutError:
            return None
        except asyncio.CancelledError:
            reason = "interrupted"
            raise
        finally:
            self.open.pop(request_id, None)
            if request_id not in self.answers:
                self.log(RequestWithdrawn(request_id, kind, reason))


class ActivityToolExecutor(ToolExecutor):
    """The real executor's batching, ordering and interrupt handling; each single call runs as
    the `tool_call` activity, which runs the real executor's per-call steps on a worker.

    A call that needs an answer (approval, clarify) comes back unrun with the request; the
    workflow waits for the answer and runs the call again with it.
    """

    def __init__(self, tools: dict[str, Tool], scope: TurnScope, requests: PendingRequests):
        # no plugin code and no approval policy here: both run on the workers, per call
        super().__init__(
            tools=tools,
            hooks=HookBus(),
            approvals=ApprovalState(),
            interactions=Interactions(scope.log),
        )
        self.scope = scope
        self.requests = requests
        self.session_grants: set[str] = set()

    async def _run_one(self, call: ToolCall, ctx: ToolContext, emit: Callable[..., Any]) -> Any:
        scope = self.scope
        tool = self.tools.get(call.name)
        seconds = (tool.timeout if tool else None) or scope.timeouts.tool_default
        answers: dict[str, str] = {}
        while True:
            out: ToolCallOutput = await workflow.execute_activity(
                "tool_call",
                ToolCallInput(
                    scope.session_id,
                    scope.task_id,
                    {"id": call.id, "name": call.name, "arguments": call.arguments},
                    answers=dict(answers),
                    session_grants=sorted(self.session_grants),
                    interactive=scope.answers,
                    agent=scope.agent,
                ),
                result_type=ToolCallOutput,
                **scope.timeouts.options(seconds + 30),
            )
            scope.log.extend(out.events)
            self.session_grants.update(out.session_grants)
            if out.needs is None:
                return CallOutcome(out.content, out.is_error, out.halt)
            answer = await self.requests.ask(out.needs)
            if answer is None:
                return _unanswered(out.needs["kind"])
            answers[out.needs["request_id"]] = answer


def _unanswered(kind: str) -> CallOutcome:
    if kind == "approval":
        return CallOutcome(
            "Denied: the approval request timed out.", True, halt="approval timed out"
        )
    return CallOutcome("The user gave no answer in time; proceed with your best judgement.")


def tool_stubs(described: list[dict[str, Any]]) -> dict[str, Tool]:
    """The worker's tools as the workflow needs them: name, schema and flags, no handler."""
    return {
        spec["name"]: Tool(
            name=spec["name"],
            description=spec["description"],
            parameters=spec["parameters"],
            handler=_never_called,
            interactive=spec["interactive"],
            timeout=spec["timeout"],
            retry_safe=spec["retry_safe"],
        )
        for spec in described
    }


def _never_called(**_: Any) -> None:
    raise RuntimeError("tool handlers run on workers, never in the workflow")
