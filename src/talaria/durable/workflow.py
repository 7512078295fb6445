"""The turn workflow: talaria's own `run_turn`, made durable by Temporal.

Each model call and each tool call is an activity on a worker; Temporal records their results,
so a worker that dies mid-turn is replaced and the turn goes on from the last recorded step:
a recorded model answer is never paid for again, a recorded tool result is never run again.
Clients talk to a running turn with the `respond` update (approvals, clarify answers, by the
request id of the `ApprovalRequested` / `ClarifyRequested` event), the `interrupt`, `steer`
and `queue` signals, and the `events` query (every engine event so far, streamed deltas
included). Queued messages (and steers that came after the last model call) run as turns of
their own in the same workflow once the turn ends, as `Agent.queue` does; being signals, they
are in the workflow's history, so a worker killed with one pending loses none and runs none
twice. The result is the same dict `Agent.run_conversation` returns (the last turn's).

The workflow sandbox imports this module for every run: it must stay free of side effects.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    import talaria.providers.pricing  # noqa: F401  (the loop imports it lazily)
    from talaria.config import Config
    from talaria.core import Usage
    from talaria.durable.compression import durable_context
    from talaria.durable.protocol import (
        WORKFLOW_NAME,
        FinishInput,
        StoredQueue,
        TurnInput,
        TurnSetup,
        loop_messages,
    )
    from talaria.durable.seams import (
        INFRA_RETRY,
        ActivityModelClient,
        ActivityTimeouts,
        ActivityToolExecutor,
        EventLog,
        PendingRequests,
        QueuedSession,
        TurnScope,
        WorkflowInterrupt,
        tool_stubs,
    )
    from talaria.durable.turn_span import turn_record
    from talaria.events import Notice
    from talaria.loop.runtime import Runtime
    from talaria.loop.spending import ACTIVE_METER, Budgets, SpendMeter
    from talaria.loop.steering import Steering, UserNote
    from talaria.loop.turn import busy_result, result_dict, run_turn
    from talaria.plugins.hooks import HookBus
    from talaria.providers.resilience.caller import CallerSettings, ModelCaller
    from talaria.providers.resilience.chain import ChainEntry, ModelChain
    from talaria.store.base import StoreError


@dataclass
class Answer:
    request_id: str
    answer: str


@workflow.defn(name=WORKFLOW_NAME)
class TurnWorkflow:
    def __init__(self) -> None:
        self.log = EventLog()
        self.stop = WorkflowInterrupt()
        self.requests = PendingRequests(self.log, timeout=300.0)
        self.steering = Steering(self.log)
        self.steering.begin_turn("")  # steers sent before the turn opens wait for its first step

    @workflow.run
    async def run(self, turn: TurnInput) -> dict[str, Any]:
        result = await self._turn(turn)
        while (note := self.steering.next_message(result["turn_exit_reason"])) is not None:
            task_id = _workflow_id("task")
            self.steering.started(note, task_id)
            queued = dataclasses.replace(
                turn,
                user_message=note.text,
                session_ref=result["session_id"],
                system_message=None,
                task_id=task_id,
            )
            result = await self._turn(queued)
        await self._keep_unrun(result["session_id"])
        return result

    async def _keep_unrun(self, session_id: str) -> None:
        """Messages still queued when the turns stop (an interrupt, a failure) are kept with
        the session in the store: they run when the session next runs, as the engine's do."""
        self.steering.end_turn()  # steers a turn that never started did not deliver
        left = self.steering.inbox.clear()
        if not left or not session_id:
            return
        await _change_stored_queue(StoredQueue(session_id, [note.to_state() for note in left]))
        self.log(
            Notice(
                "info",
                f"{len(left)} queued message(s) did not run: they are kept with the session "
                "and run when it next runs",
            )
        )

    async def _adopt(self, setup: TurnSetup) -> None:
        """Messages the store kept queued for the session run after this workflow's turns,
        ahead of those queued here; the store lets them go once the workflow's history has
        them (a replay reads the same list from the history), so each runs once."""
        kept = [note for note in map(UserNote.from_state, setup.queued) if note is not None]
        if not kept:
            return
        self.steering.inbox.adopt(kept)
        await _change_stored_queue(StoredQueue(setup.session_id, setup.queued, taken=True))
        self.log(
            Notice(
                "info",
                f"{len(kept)} message(s) queued when the session last ran: they run after "
                "this turn",
            )
        )

    async def _turn(self, turn: TurnInput) -> dict[str, Any]:
        started = workflow.now()
        setup: TurnSetup = await workflow.execute_local_activity(  # local: no queue round trip
            "open_turn",
            turn,
            result_type=TurnSetup,
            start_to_close_timeout=timedelta(seconds=120),
            retry_policy=INFRA_RETRY,
        )
        session_meter = _session_meter(setup.config, setup.session_usage)
        config = Config(data=setup.config, home=Path("."))
        timeouts = ActivityTimeouts(
            heartbeat=float(config.durable.heartbeat_timeout),
            model_call=float(config.durable.model_call_timeout),
            tool_default=float(config.agent.tool_timeout),
            request=float(config.approvals.timeout),
        )
        self.requests.timeout = timeouts.request
        session = QueuedSession(
            setup.session_id,
            None,
            setup.system_prompt,
            loop_messages(setup.history),
            len(setup.history),
        )
        if setup.busy:
            return dict(busy_result(StoreError(setup.busy), session, setup.task_id))
        await self._adopt(setup)
        scope = TurnScope(
            setup.task_id,
            setup.writer,
            turn.agent,
            turn.answers,
            turn.deltas,
            timeouts,
            session,
            self.log,
        )
        runtime = self._runtime(setup, config, scope)
        runtime.steering = self.steering.inbox
        self.steering.begin_turn(setup.task_id)
        runtime.context = durable_context(config, scope)
        opened_as, active = session.id, runtime.caller.chain.active  # what the span names
        metering = ACTIVE_METER.set(session_meter)
        try:
            state = await run_turn(runtime, session, turn.user_message, setup.task_id)
        except Exception as exc:  # a bug, not a provider failure: fail the turn visibly
            raise ApplicationError(
                f"the turn failed: {type(exc).__name__}: {exc}", non_retryable=True
            ) from exc
        finally:
            ACTIVE_METER.reset(metering)
        self.steering.end_turn()  # a steer after the last model call becomes a queued message
        finish = FinishInput(
            session.id, dict(state.usage.to_dict()), state.model, state.provider, state.api_mode,
            unsaved=session.take(), writer=setup.writer,
            records=[
                {"model": model, "provider": provider, "calls": calls, "usage": usage.to_dict()}
                for (model, provider), (usage, calls) in state.models.entries.items()
            ],
            span=turn_record(
                session_id=opened_as, task_id=setup.task_id, model=active.model,
                provider=active.provider, user_message=turn.user_message,
                started=started, state=state,
            ),
        )  # fmt: skip
        await workflow.execute_local_activity(
            "finish_turn",
            finish,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=INFRA_RETRY,
        )
        return dict(result_dict(state, session, self.stop.message))

    def _runtime(self, setup: TurnSetup, config: Config, scope: TurnScope) -> Runtime:
        entries = [
            ChainEntry(spec=None, fixed_client=ActivityModelClient(scope, index, entry))
            for index, entry in enumerate(setup.chain)
        ]
        configured = CallerSettings.from_config(config.model, config.retry)
        settings = dataclasses.replace(
            configured,
            retry=dataclasses.replace(configured.retry, rng=_workflow_random),
            first_byte_timeout=math.inf,
            idle_timeout=math.inf,
        )
        tools = tool_stubs(setup.tools)
        return Runtime(
            config=config,
            caller=ModelCaller(ModelChain(entries), self.log, settings),
            tools=tools,
            executor=ActivityToolExecutor(tools, scope, self.requests),
            hooks=HookBus(),
            emit=self.log,
            interrupt=self.stop,
            cwd=Path("."),
            home=Path("."),
            max_iterations=setup.max_iterations,
            stream=setup.stream,
            tool_schemas=[spec["schema"] for spec in setup.tools],
        )

    @workflow.signal
    def interrupt(self, message: str | None = None) -> None:
        """Stop the turn cleanly (the running activity is cancelled)."""
        self.stop.set(message)

    @workflow.signal
    def steer(self, text: str) -> None:
        """A note for the turn's next model call, after the current tool results. A signal
        is in the workflow's history, so a worker that dies with a steer pending is replaced
        and the note is delivered once."""
        self.steering.steer(text, None, note_id=_workflow_id("msg"))

    @workflow.signal
    def queue(self, text: str) -> None:
        """A message to run as a turn of its own when this one ends (`MessageQueued`)."""
        self.steering.queue(text, note_id=_workflow_id("msg"))

    @workflow.signal
    def stream(self, events: list[dict[str, Any]]) -> None:
        """Deltas streamed by the worker running the model call."""
        self.log.extend(events)

    @workflow.update
    def respond(self, answer: Answer) -> bool:
        """Answer a pending approval ("once" | "session" | "always" | "deny") or clarify."""
        return self.requests.respond(answer.request_id, answer.answer)

    @workflow.query
    def events(self, since: int = 0) -> list[dict[str, Any]]:
        return self.log.events[since:]

    @workflow.query
    def pending(self) -> list[dict[str, Any]]:
        """Requests waiting for an answer now."""
        return list(self.requests.open.values())


def _session_meter(settings: dict[str, Any], spent: dict[str, Any] | None) -> SpendMeter | None:
    """The per-session budgets as the meter above the turn's own (the loop checks both, and
    names the session limit when it stops). The loop would read the session's totals from
    the store, which a workflow cannot reach, so `open_turn` read them; the limits leave the
    settings the loop sees, so it meters the turn alone."""
    agent = settings.get("agent") or {}
    cost, tokens = agent.pop("max_session_cost_usd", None), agent.pop("max_session_tokens", None)
    if cost is None and tokens is None:
        return None
    limits = Budgets(
        session_cost=None if cost is None else float(cost),
        session_tokens=None if tokens is None else int(tokens),
    )
    return SpendMeter(limits, Usage.from_dict(spent) if spent else None)


async def _change_stored_queue(change: StoredQueue) -> None:
    await workflow.execute_local_activity(
        "stored_queue",
        change,
        start_to_close_timeout=timedelta(seconds=60),
        retry_policy=INFRA_RETRY,
    )


def _workflow_id(prefix: str) -> str:
    """An id from the workflow's seeded randomness: the same on every replay."""
    return f"{prefix}_{workflow.uuid4().hex[:12]}"


def _workflow_random() -> float:
    """Retry jitter from the workflow's seeded randomness, so a replay waits the same."""
    return workflow.random().random()
