"""Run a turn on a Temporal cluster from anywhere: start it, follow its events, answer its
requests, interrupt it, and get the same result dict `Agent.run_conversation` returns.

    client = await connect("127.0.0.1:7233")
    turn = await start_turn(client, "talaria", "Fix the bug in main.py", answers=True)
    result = await turn.follow(print)      # every event as it happens, then the result

A turn runs on whichever worker of the task queue picks it up; this process only talks to
the server, so it needs no model key and may exit and reconnect (`DurableTurn.attach`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from temporalio.client import Client, WorkflowHandle

from talaria.durable.protocol import AGENT_OVERRIDES, TurnInput
from talaria.durable.workflow import Answer, TurnWorkflow

EventCallback = Callable[[dict[str, Any]], Any]


class DurableError(RuntimeError):
    """The cluster cannot be reached, or the turn failed there."""


async def connect(target: str, namespace: str = "default", *, traced: bool = False) -> Client:
    """A client of the cluster; `traced` (telemetry on) adds Temporal's tracing interceptor,
    so a turn started here and the worker's spans for it (workflow, activities, talaria's
    `chat` and `execute_tool`) are one trace, under the current span when there is one."""
    interceptors: list[Any] = []
    if traced:
        from temporalio.contrib.opentelemetry import TracingInterceptor

        interceptors.append(TracingInterceptor(always_create_workflow_spans=True))
    try:
        return await Client.connect(target, namespace=namespace, interceptors=interceptors)
    except Exception as exc:
        raise DurableError(f"cannot reach the Temporal server at {target}: {exc}") from None


class DurableTurn:
    """A turn running on the cluster (one workflow execution)."""

    def __init__(self, handle: WorkflowHandle[Any, Any]) -> None:
        self.handle = handle

    @property
    def id(self) -> str:
        return self.handle.id

    @classmethod
    def attach(cls, client: Client, workflow_id: str) -> DurableTurn:
        return cls(client.get_workflow_handle_for(TurnWorkflow.run, workflow_id))

    async def events(self, since: int = 0) -> list[dict[str, Any]]:
        """Every event from number `since` on (deltas, tools, requests, the turn's end)."""
        return list(await self.handle.query(TurnWorkflow.events, since))

    async def pending(self) -> list[dict[str, Any]]:
        return list(await self.handle.query(TurnWorkflow.pending))

    async def respond(self, request_id: str, answer: str) -> bool:
        """Answer an approval ("once" | "session" | "always" | "deny") or a clarify question;
        False when that request is not waiting (answered, timed out, never asked)."""
        update = Answer(request_id, answer)
        answered = await self.handle.execute_update(TurnWorkflow.respond, update)
        return bool(answered)

    async def interrupt(self, message: str | None = None) -> None:
        await self.handle.signal(TurnWorkflow.interrupt, message)

    async def steer(self, text: str) -> None:
        """Tell the running turn something now: the model reads it with its next call, after
        the current tool results (`SteerAccepted`, then `SteerDelivered` events). One that
        comes after the turn's last model call runs as the next message (`MessageQueued`)."""
        await self.handle.signal(TurnWorkflow.steer, text)

    async def queue(self, text: str) -> None:
        """Run `text` as a turn of its own, in the same workflow, once the running one ends
        (`MessageQueued`, then `QueuedMessageStarted`); the result is the last turn's."""
        await self.handle.signal(TurnWorkflow.queue, text)

    async def result(self) -> dict[str, Any]:
        from temporalio.client import WorkflowFailureError

        try:
            return dict(await self.handle.result())
        except WorkflowFailureError as exc:
            cause = exc.cause.message if exc.cause is not None else str(exc)  # type: ignore[attr-defined]
            raise DurableError(f"turn {self.id} failed on the cluster: {cause}") from None

    async def follow(
        self, on_event: EventCallback | None = None, poll: float = 0.2
    ) -> dict[str, Any]:
        """Call `on_event` with each event as it happens (it may answer requests), then
        return the result."""
        finished = asyncio.ensure_future(self.result())
        seen = 0
        try:
            while True:
                done = finished.done()
                if on_event is not None:
                    new = await self.events(seen)
                    seen += len(new)
                    for event in new:
                        outcome = on_event(event)
                        if asyncio.iscoroutine(outcome):
                            await outcome
                if done:
                    return finished.result()
                await asyncio.wait({finished}, timeout=poll)
        finally:
            if not finished.done():
                finished.cancel()


async def start_turn(
    client: Client,
    task_queue: str,
    user_message: str,
    *,
    session: str | None = None,
    system_message: str | None = None,
    agent: dict[str, Any] | None = None,
    answers: bool = False,
    workflow_id: str | None = None,
) -> DurableTurn:
    """Start a turn: `session` continues a stored session (id, title or "latest"), None
    starts one; `agent` overrides the worker's model settings (model, provider, base_url,
    api_mode, toolsets, max_turns); `answers=True` says this client answers approvals and
    clarify questions (otherwise approvals are denied, as for any headless agent)."""
    overrides = {k: v for k, v in (agent or {}).items() if v is not None}
    unknown = sorted(set(overrides) - set(AGENT_OVERRIDES))
    if unknown:
        raise ValueError(
            f"a durable turn cannot override {', '.join(unknown)} (api keys stay "
            f"on the workers); allowed: {', '.join(AGENT_OVERRIDES)}"
        )
    turn = TurnInput(
        user_message=user_message,
        session_ref=session,
        system_message=system_message,
        agent=overrides,
        answers=answers,
    )
    handle = await client.start_workflow(
        TurnWorkflow.run,
        turn,
        id=workflow_id or f"talaria-turn-{uuid.uuid4().hex}",
        task_queue=task_queue,
    )
    return DurableTurn(handle)


async def run_durable_turn(
    client: Client,
    task_queue: str,
    user_message: str,
    *,
    on_event: EventCallback | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Start a turn and wait for its result (the library twin of `talaria chat --temporal`)."""
    turn = await start_turn(client, task_queue, user_message, **options)
    return await turn.follow(on_event)
