"""The worker side of a durable turn: the activities that touch the world.

A worker holds one assembled agent per set of turn overrides (model client, tools, plugins,
the approval policy) and one session store shared by all of them. `model_call` runs one
request on the real client and streams its deltas back to the workflow; `tool_call` runs the
real executor's steps for one call. Both heartbeat, so a dead worker is noticed within the
heartbeat timeout and the activity moves to another worker.

Exactly-once tool effects: a call's final result is written to the session store under its
idempotency key before the activity completes, so a retry after a crash returns that result
instead of running the tool again. A crash *during* a tool leaves no result: a `retry_safe`
tool runs again with the same `ToolContext.idempotency_key`; any other tool is reported to
the model as interrupted and is never run twice.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from temporalio import activity

from talaria.core import StreamHandler, ToolCall, Usage
from talaria.durable.compression import COMPRESSION_SETTINGS
from talaria.durable.credentials import refresh_key
from talaria.durable.heartbeat import DeltaForwarder, heartbeating
from talaria.durable.protocol import (
    AGENT_OVERRIDES,
    ContinueInput,
    FinishInput,
    ModelCallInput,
    StoredQueue,
    SummaryInput,
    ToolCallInput,
    ToolCallOutput,
    TurnInput,
    TurnSetup,
    Unsaved,
    error_to_dict,
    event_to_dict,
    loop_messages,
    payload_messages,
    request_from_dict,
    request_id,
    response_to_dict,
)
from talaria.durable.turn_span import record_turn_span
from talaria.events import ClarifyRequested
from talaria.interaction import RequestLapsed
from talaria.loop.held_text import held_for, settle
from talaria.loop.steering import QUEUE_STATE_KEY
from talaria.policy.approval import ApprovalState
from talaria.providers.errors import ProviderError
from talaria.providers.resilience.caller import Watchdog
from talaria.store.base import SessionBusy, UsageRecord
from talaria.tools.base import ToolContext

if TYPE_CHECKING:
    from talaria.agent import Agent
    from talaria.agent_tools.services import AgentServices
    from talaria.loop.runtime import Runtime

log = logging.getLogger("talaria.durable")

LOOP_SETTINGS = (
    "model.max_tokens", "prompt_caching.enabled", "prompt_caching.ttl", "retry.max_attempts",
    "retry.base_delay", "retry.max_delay", "approvals.timeout", "agent.tool_timeout",
    "durable.heartbeat_timeout", "durable.model_call_timeout", "agent.max_cost_usd",
    "agent.max_tokens_per_turn", "agent.max_session_cost_usd", "agent.max_session_tokens",
    *COMPRESSION_SETTINGS,
)  # fmt: skip
"""The settings the workflow's copy of the loop reads; it gets these and nothing else."""

NOT_RETRIED = (
    "Interrupted: the worker running this call stopped before it finished. {name} is not "
    "safe to run twice, so it was not run again; it may or may not have taken effect. Check "
    "before calling it again."
)


class WorkerAgents:
    """The agents of one worker process, one per distinct set of turn overrides."""

    def __init__(self, options: dict[str, Any]) -> None:
        from talaria.config import Config
        from talaria.store.factory import configured_store

        self.options = options
        config = Config.load(options.get("home"), overrides=options.get("config"))
        self.store = configured_store(config)
        self._agents: dict[str, tuple[Agent, Runtime]] = {}

    def get(self, overrides: dict[str, Any]) -> tuple[Agent, Runtime]:
        key = repr(sorted((k, repr(v)) for k, v in overrides.items() if k in AGENT_OVERRIDES))
        if key not in self._agents:
            from talaria.agent import Agent
            from talaria.assembly import assemble_runtime

            kwargs = {**self.options, "store": self.store}
            kwargs.update({k: v for k, v in overrides.items() if k in AGENT_OVERRIDES})
            if "max_turns" in kwargs:
                kwargs["max_iterations"] = kwargs.pop("max_turns")
            agent = Agent(**kwargs)
            # clarify is offered; each call asks its question through the workflow
            agent.interactions.add_responder(["clarify"])
            self._agents[key] = (agent, assemble_runtime(agent))
        return self._agents[key]

    @property
    def traced(self) -> bool:
        """Whether this worker records telemetry (`telemetry.enabled`, `TALARIA_OTEL=1`)."""
        from talaria.core.telemetry import NO_TELEMETRY

        return self.get({})[1].telemetry is not NO_TELEMETRY

    def warm_up(self) -> None:
        """Assemble the default agent and its model clients now (on the worker's loop): the
        first SDK import and client take seconds, and an activity doing that work instead
        would miss its heartbeats and be taken for dead."""
        _, runtime = self.get({})
        for entry in runtime.caller.chain.entries:
            try:
                entry.client()
            except Exception as exc:
                log.warning("model client %s not ready: %s", entry.label, exc)

    async def aclose(self) -> None:
        for _, runtime in self._agents.values():
            await runtime.caller.chain.aclose()
            runtime.close()
        self.store.close()


class TurnActivities:
    def __init__(self, agents: WorkerAgents) -> None:
        self.agents = agents

    @activity.defn(name="open_turn")
    async def open_turn(self, turn: TurnInput) -> TurnSetup:
        """Resume or start the session and take its writer lease for the turn; describe the
        chain, tools and settings to the workflow."""
        from talaria.assembly import open_session

        agent, runtime = self.agents.get(turn.agent)
        session = open_session(agent, runtime, turn.system_message, turn.session_ref)
        writer = f"temporal:{activity.info().workflow_id}"  # the same on every worker
        busy = None
        try:
            lease = float(agent.config.durable.lease_ttl)
            self.agents.store.claim_writer(session.id, writer, ttl=lease)
        except SessionBusy as exc:
            busy = str(exc)
        stored = self.agents.store.get_session(session.id)
        queued = [] if busy else _kept_queue(self.agents.store, session.id)
        return TurnSetup(
            session_id=session.id,
            system_prompt=session.system_prompt,
            history=payload_messages(session.history),
            chain=[
                {
                    "model": e.model,
                    "provider": e.provider,
                    "api_mode": e.api_mode,
                    "base_url": e.spec.base_url if e.spec else "",
                }
                for e in runtime.caller.chain.entries
            ],
            tools=[
                _describe(tool, schema)
                for tool, schema in zip(runtime.tools.values(), runtime.tool_schemas, strict=True)
            ],
            config=await _loop_settings(agent, runtime),
            max_iterations=agent.max_iterations,
            stream=bool(agent.stream),
            task_id=turn.task_id or runtime.new_id(),
            writer=writer,
            busy=busy,
            session_usage=stored.usage if stored is not None else None,
            queued=queued,
        )

    @activity.defn(name="model_call")
    async def model_call(self, call: ModelCallInput) -> dict[str, Any]:
        """One request on the real client (with the stream watchdog); errors come back as
        data so that the turn's own retry and fallback policy decides what happens next."""
        agent, runtime = self.agents.get(call.agent)
        self._save(call.session_id, call.unsaved, call.writer)
        entry = runtime.caller.chain.entries[call.entry]
        request = request_from_dict(call.request)
        deltas = DeltaForwarder(activity.info().workflow_id or "", call.deltas, call.separator)
        # A tool call the model writes as text never streams to the turn's followers.
        text_calls = bool(runtime.config.tools.text_calls)
        held = held_for(deltas, request, entry.profile, text_calls)
        stream = held or deltas
        hook_args = {"session_id": call.session_id, "task_id": call.task_id}
        runtime.hooks.emit("pre_llm_call", request=request, **hook_args)
        with runtime.telemetry.model_call(request, entry) as observed:
            async with heartbeating(deltas.flush):
                try:
                    client, response = await _complete(runtime, entry, request, stream)
                except ProviderError as error:
                    notice = await refresh_key(agent, call.entry, entry, error)
                    if notice is None:
                        observed.attempt_failed(error, "raise")  # the workflow decides next
                        return {"error": error_to_dict(error)}
                    observed.attempt_failed(error, "retry")
                    deltas.note(notice)
                    try:
                        client, response = await _complete(runtime, entry, request, stream)
                    except ProviderError as again:
                        observed.attempt_failed(again, "raise")
                        return {"error": error_to_dict(again)}
                if held is not None:
                    settle(held, request, response)
            observed.answered(client, response)
        runtime.hooks.emit("post_llm_call", response=response, **hook_args)
        return {"response": response_to_dict(response)}

    @activity.defn(name="tool_call")
    async def tool_call(self, call: ToolCallInput) -> ToolCallOutput:
        agent, runtime = self.agents.get(call.agent)
        key = f"{activity.info().workflow_id}:{call.call['id']}"
        ledger = _Ledger(self.agents.store, call.session_id, f"durable:{key}")
        recorded = ledger.read()
        if recorded is not None and recorded.get("status") == "done":
            return ToolCallOutput(**recorded["output"])
        tool = runtime.tools.get(call.call["name"])
        retry_safe = tool is None or tool.retry_safe
        if recorded is not None and not retry_safe:
            return ledger.done(ToolCallOutput(NOT_RETRIED.format(name=call.call["name"]), True))
        if not retry_safe:
            ledger.start()
        output = await self._run_tool(agent, runtime, call, key)
        if output.needs is not None:
            ledger.clear()
            return output
        return ledger.done(output)

    async def _run_tool(
        self, agent: Agent, runtime: Runtime, call: ToolCallInput, key: str
    ) -> ToolCallOutput:
        bridge = _AnswerBridge(call.call["id"], call.answers, call.interactive)
        executor = copy.copy(runtime.executor)  # shares the thread pool; own approval state
        base = agent.approvals
        executor.approvals = ApprovalState(
            mode=base.mode,
            allowlist=base.allowlist,
            session_grants=set(call.session_grants),
            persist_allowlist=base.persist_allowlist,
        )
        executor.interactions = cast(Any, bridge)
        events: list[dict[str, Any]] = []
        ctx = ToolContext(
            task_id=call.task_id,
            session_id=call.session_id,
            cwd=runtime.cwd,
            home=runtime.home,
            interrupt=threading.Event(),
            emit=lambda event: events.append(event_to_dict(event)),
            call_id=call.call["id"],
            clarify=bridge.clarify if call.interactive else None,
            services=self._services(runtime, call.session_id),
            sandbox=runtime.sandbox,
            idempotency_key=key,
        )
        async with heartbeating():
            try:
                outcome = await executor.run_call(ToolCall(**call.call), ctx, ctx.emit)
            except asyncio.CancelledError:
                ctx.interrupt.set()  # the turn was interrupted: let the tool stop
                raise
        if bridge.needs is not None:
            return ToolCallOutput(needs=bridge.needs)
        return ToolCallOutput(
            outcome.content,
            outcome.is_error,
            outcome.halt,
            session_grants=sorted(executor.approvals.session_grants),
            events=events,
        )

    def _services(self, runtime: Runtime, session_id: str) -> AgentServices:
        """The agent tools' state for this session (one worker serves many sessions)."""
        from talaria.agent_tools.todo import TodoList
        from talaria.assembly import agent_services

        todos = self.agents.store.get_state(session_id, "todos")
        return dataclasses.replace(
            agent_services(runtime), session_id=session_id, todos=TodoList.from_json(todos)
        )

    def _save(self, session_id: str, unsaved: Unsaved | None, writer: str) -> None:
        """Append the turn's new messages under its lease (idempotent by seq: a retried
        activity may append them again)."""
        if unsaved is not None:
            items = list(enumerate(unsaved.messages, start=unsaved.first_seq))
            self.agents.store.append_messages(session_id, items, writer=writer or None)

    @activity.defn(name="summarise")
    async def summarise(self, summary: SummaryInput) -> dict[str, Any]:
        """Compression's summary on the worker's `compression` model (then its fallbacks,
        then the main model); a failure comes back as data, so the turn falls back to
        trimming as a normal turn does."""
        from talaria.loop.auxiliary import side_answer

        _, runtime = self.agents.get(summary.agent)
        async with heartbeating():
            try:
                client, response = await side_answer(
                    runtime, "compression", loop_messages(summary.messages)
                )
            except ProviderError as error:
                return {"error": error_to_dict(error)}
        return {
            "response": response_to_dict(response),
            "model": client.model,
            "provider": client.provider,
        }

    @activity.defn(name="continue_session")
    async def continue_session(self, hand_over: ContinueInput) -> None:
        """Save the parent's last messages, then continue in the child in one transaction;
        a retry after the transaction committed finds the child and does nothing."""
        store = self.agents.store
        if store.get_session(hand_over.child_id) is not None:
            return
        self._save(hand_over.parent_id, hand_over.unsaved, hand_over.writer)
        todos = store.get_state(hand_over.parent_id, "todos")
        store.continue_in_child(
            hand_over.parent_id,
            hand_over.child_id,
            loop_messages(hand_over.messages),
            model=hand_over.model or None,
            provider=hand_over.provider or None,
            api_mode=hand_over.api_mode or None,
            system_prompt=hand_over.system_prompt,
            state={"todos": todos} if todos else {},
            writer=hand_over.writer or None,
        )

    @activity.defn(name="finish_turn")
    async def finish_turn(self, finish: FinishInput) -> None:
        """Save the last messages, add the turn's usage to the session's totals, and give
        the writer lease back."""
        self._save(finish.session_id, finish.unsaved, finish.writer)
        store = self.agents.store
        info = store.get_session(finish.session_id)
        totals = Usage.from_dict(info.usage if info and info.usage else {})
        totals.add(Usage.from_dict(finish.usage))
        store.update_session(
            finish.session_id,
            usage=totals.to_dict(),
            model=finish.model or None,
            provider=finish.provider or None,
            api_mode=finish.api_mode or None,
        )
        store.record_usage(
            finish.session_id, [UsageRecord(finish.session_id, **r) for r in finish.records]
        )
        if finish.writer:
            store.release_writer(finish.session_id, finish.writer)
        agent, runtime = self.agents.get({})
        name = str(agent.config.telemetry.agent_name)
        record_turn_span(runtime.telemetry, name, finish.span, finish)

    @activity.defn(name="stored_queue")
    async def stored_queue(self, change: StoredQueue) -> None:
        """Add messages to the session's queue in the store, or take them off (once each: a
        retried call changes nothing twice)."""
        store = self.agents.store
        kept = _kept_queue(store, change.session_id)
        ids = {note.get("id") for note in change.notes}
        if change.taken:
            kept = [note for note in kept if note.get("id") not in ids]
        else:
            known = {note.get("id") for note in kept}
            kept += [note for note in change.notes if note.get("id") not in known]
        store.set_state(change.session_id, QUEUE_STATE_KEY, kept)

    def all(self) -> list[Callable[..., Awaitable[Any]]]:
        return [
            self.open_turn,
            self.model_call,
            self.tool_call,
            self.summarise,
            self.continue_session,
            self.finish_turn,
            self.stored_queue,
        ]


def _kept_queue(store: Any, session_id: str) -> list[dict[str, Any]]:
    """The session's queued messages as the store keeps them (well-formed entries only)."""
    kept = store.get_state(session_id, QUEUE_STATE_KEY) or []
    return [note for note in kept if isinstance(note, dict) and note.get("id")]


async def _complete(
    runtime: Runtime, entry: Any, request: Any, deltas: StreamHandler
) -> tuple[Any, Any]:
    """One attempt on the real client, under the stream watchdog: (client, response)."""
    settings = runtime.caller.settings
    watch = Watchdog(deltas, settings.first_byte_timeout, settings.idle_timeout)
    client = entry.client()
    response = await watch.guard(client.complete(request, watch), streaming=request.stream)
    return client, response


def _describe(tool: Any, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "schema": schema,
        "interactive": tool.interactive,
        "retry_safe": tool.retry_safe,
        "timeout": tool.timeout,
    }


async def _loop_settings(agent: Agent, runtime: Runtime) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for dotted in LOOP_SETTINGS:
        value = agent.config.get(dotted)
        if value is not None:
            section, _, name = dotted.partition(".")
            settings.setdefault(section, {})[name] = value
    model = settings.setdefault("model", {})
    # The workflow cannot read the worker's files: images tools saved stay paths here.
    model["vision"] = False
    if runtime.context is not None and not model.get("context_length"):
        # nor ask the endpoint: the worker's window (config, endpoint, table) is the one
        model["context_length"] = await runtime.context.window(runtime)
    return settings


class _Ledger:
    """One call's entry in the session store: started, then done with its output."""

    def __init__(self, store: Any, session_id: str, key: str) -> None:
        self.store, self.session_id, self.key = store, session_id, key

    def read(self) -> dict[str, Any] | None:
        value = self.store.get_state(self.session_id, self.key)
        return value if isinstance(value, dict) else None

    def start(self) -> None:
        self.store.set_state(self.session_id, self.key, {"status": "started"})

    def clear(self) -> None:
        self.store.set_state(self.session_id, self.key, None)

    def done(self, output: ToolCallOutput) -> ToolCallOutput:
        entry = {"status": "done", "output": dataclasses.asdict(output)}
        self.store.set_state(self.session_id, self.key, entry)
        return output


class _AnswerBridge:
    """The executor's `Interactions` for one call: a request the workflow has an answer for
    is answered at once; one it has none for is noted (`needs`) and lapses, so the call does
    not run and the workflow asks the user, then runs the call again with the answer."""

    def __init__(self, call_id: str, answers: dict[str, str], interactive: bool) -> None:
        self.call_id = call_id
        self.answers = answers
        self.interactive = interactive
        self.needs: dict[str, Any] | None = None

    def can_answer(self, kind: str) -> bool:
        return self.interactive

    async def ask(self, make_request: Callable[[str], Any], timeout: float | None) -> str:
        asked = make_request("")
        request = dataclasses.replace(asked, request_id=request_id(asked.kind, self.call_id))
        if request.request_id in self.answers:
            return self.answers[request.request_id]
        self.needs = event_to_dict(request)
        raise RequestLapsed("asked through the workflow")

    async def clarify(self, question: str, choices: list[str] | None) -> str | None:
        try:
            return await self.ask(
                lambda rid: ClarifyRequested(rid, self.call_id, question, choices), None
            )
        except RequestLapsed:
            return None
