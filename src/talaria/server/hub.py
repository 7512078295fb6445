"""The server's sessions: one live Agent per session (an LRU), one turn at a time on each.

Every turn, whichever endpoint starts it, is a `Run` that consumes the turn's
`agent.events()` stream on the server's event loop (docs/architecture.md, "One engine, many
front ends"). Runs started through the runs API answer approvals and clarify questions through
their clients; turns of the OpenAI-compatible endpoints are headless: nobody can answer, so the
engine's headless rule denies approvals (and tells the model), and a clarify question gets a
fixed answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from talaria import events as ev
from talaria.loop.session import new_session_id
from talaria.offload import run_blocking
from talaria.server.errors import ApiError
from talaria.server.runs import Run, terminal_event
from talaria.server.settings import ServerSettings
from talaria.skills.invoke import with_skill
from talaria.store.base import StoreError

if TYPE_CHECKING:
    from talaria.agent import Agent
    from talaria.core import Message
    from talaria.store.base import SessionStore

log = logging.getLogger("talaria.server")

HEADLESS_CLARIFY_ANSWER = (
    "No one can answer questions in this conversation (it runs through an API without a "
    "user at hand). Proceed with your best judgement and say what you assumed."
)
RETAINED_RUNS = 2_000

AgentFactory = Callable[[str], "Agent"]
"""Builds the agent for a session id (the server's model, tools and the shared store)."""


@dataclass
class LiveSession:
    session_id: str
    agent: Agent
    run: Run | None = None
    """The turn in progress (None when idle)."""


@dataclass(slots=True)
class TurnRequest:
    text: str
    session_id: str | None = None
    headless: bool = False
    when_busy: str = "reject"
    """What a message for a session that is running a turn does: reject (409), queue (runs
    after the turn, in the same run), steer (joins the running turn), interrupt (stops it,
    then runs)."""
    history: list[Message] | None = None
    """Seeds a new session (the OpenAI endpoints' earlier messages)."""
    system: str | None = None
    skills: bool = False
    """`/<skill-name> request` runs that skill (the runs API and its web page)."""


SHUTDOWN_GRACE = 0.5
"""Seconds an interrupted turn gets to end by itself when the server stops."""
SHUTTING_DOWN = "the server is shutting down"


class SessionHub:
    def __init__(
        self, make_agent: AgentFactory, store: SessionStore, settings: ServerSettings
    ) -> None:
        self.make_agent = make_agent
        self.store = store
        self.settings = settings
        self.runs: dict[str, Run] = {}
        self._live: OrderedDict[str, LiveSession] = OrderedDict()

    # ---- turns ----------------------------------------------------------------------------

    async def start_turn(self, request: TurnRequest) -> Run:
        """Start a turn as a background task and return its run at once; 404 for an unknown
        session, 409 when the session is already running a turn."""
        session_id = request.session_id
        if session_id is None:
            session_id = new_session_id()
        elif session_id not in self._live:
            await self.require_session(session_id)
        live = self._live_session(session_id)
        if live.run is not None:
            return self._while_busy(live, live.run, request)
        run = Run(session_id, asyncio.get_running_loop(), self.settings.max_run_events)
        live.run = run
        self.runs[run.id] = run
        run.publish("run.started", {"run_id": run.id, "session_id": session_id})
        run.task = asyncio.create_task(self._drive(live, run, request))
        await self._evict_idle()
        self._prune_runs()
        return run

    async def _drive(self, live: LiveSession, run: Run, request: TurnRequest) -> None:
        agent = live.agent
        answers = () if request.headless else ("approval", "clarify")
        result: dict[str, Any] | None = None
        try:
            text = await self._expanded(agent, request, answers)
            turn = agent.events(
                text,
                system_message=request.system,
                conversation_history=request.history,
                answers=answers,
            )
            async for event in turn:
                if request.headless and isinstance(event, ev.ClarifyRequested):
                    agent.respond(event.request_id, HEADLESS_CLARIFY_ANSWER)
                run.on_engine_event(event)
            result = dict(turn.result or {})
            name, data = terminal_event(result)
        except StoreError as exc:  # its message says what is wrong and what to do
            log.warning("run %s failed: %s", run.id, exc)
            name, data = "run.failed", {"error": str(exc), "usage": {}}
        except Exception as exc:
            log.warning("run %s crashed", run.id, exc_info=True)
            name, data = "run.failed", {"error": f"{type(exc).__name__}: {exc}", "usage": {}}
        finally:
            live.run = None
            self._follow_compression(live)
        run.result = result
        run.publish(name, data)

    @staticmethod
    async def _expanded(agent: Agent, request: TurnRequest, answers: tuple[str, ...]) -> str:
        """The message, with `/<skill-name>` in place of the skill's instructions when asked.
        Plugins' skills are known once the agent is assembled, and assembly offers clarify
        only to an agent whose questions someone answers: declared first, as events() does."""
        if not request.skills:
            return request.text
        stop_answering = agent.subscribe(_ignore, answers=answers)
        try:
            await run_blocking(agent.warm_up)
            return await run_blocking(with_skill, request.text, agent.skills)
        finally:
            stop_answering()

    def _follow_compression(self, live: LiveSession) -> None:
        """Compression continues a conversation in a child session: file the agent under it
        (the turn's result names it), so the next turn on the child reuses this agent."""
        current = live.agent.session_id
        if current and current != live.session_id and current not in self._live:
            del self._live[live.session_id]
            live.session_id = current
            self._live[current] = live

    def _while_busy(self, live: LiveSession, run: Run, request: TurnRequest) -> Run:
        """A message for a session whose turn is running: the run it joins, as asked."""
        agent, text = live.agent, request.text
        if request.when_busy == "queue":
            agent.queue(text)
        elif request.when_busy == "steer":
            agent.steer(text)
        elif request.when_busy == "interrupt":
            agent.interrupt(text)
        else:
            raise ApiError(
                409,
                f"session busy: {live.session_id} is running {run.id}; wait for it to end, "
                'cancel it, or send with "when_busy": "queue", "steer" or "interrupt"',
                "session_busy",
            )
        return run

    def steer(self, run_id: str, text: str) -> str:
        """Add a steer to a running run's turn; 409 once the run has ended."""
        return self._running(run_id).agent.steer(text)

    async def queue(self, session_id: str, text: str) -> tuple[Run, str | None]:
        """Queue a message on a session: it runs after the turn in progress (in the same run),
        or at once in a new run when the session is idle. (run, queued message id or None)."""
        live = self._live.get(session_id)
        if live is not None and live.run is not None:
            return live.run, live.agent.queue(text)
        run = await self.start_turn(TurnRequest(text=text, session_id=session_id))
        return run, None

    def _running(self, run_id: str) -> LiveSession:
        run = self.run(run_id)
        live = self._live.get(run.session_id)
        if run.done or live is None or live.run is not run:
            raise ApiError(409, f"run {run_id} has already finished ({run.status})")
        return live

    def run(self, run_id: str) -> Run:
        run = self.runs.get(run_id)
        if run is None:
            raise ApiError(404, f"no run {run_id!r} (finished runs are kept for a while only)")
        return run

    def cancel(self, run_id: str) -> Run:
        self._running(run_id).agent.interrupt(reason="cancelled by the client")
        return self.run(run_id)

    def respond(self, run_id: str, request_id: str, answer: object) -> None:
        """Answer a pending approval or clarify request of a running run."""
        live = self._running(run_id)
        try:
            accepted = live.agent.respond(request_id, answer)
        except ValueError as exc:
            raise ApiError(422, str(exc)) from None
        if not accepted:
            raise ApiError(
                404, f"request {request_id!r} is not pending (answered, withdrawn or unknown)"
            )

    # ---- sessions -------------------------------------------------------------------------

    async def require_session(self, session_id: str) -> None:
        if await run_blocking(self.store.get_session, session_id) is None:
            raise ApiError(404, f"no session {session_id!r}")

    async def idle_agent(self, session_id: str) -> Agent:
        """The session's agent, ready (404 for an unknown session, 409 while it runs a turn)."""
        if session_id not in self._live:
            await self.require_session(session_id)
        live = self._live_session(session_id)
        if live.run is not None:
            raise ApiError(
                409, f"session busy: {session_id} is running {live.run.id}", "session_busy"
            )
        await run_blocking(live.agent.warm_up)
        return live.agent

    def busy_run(self, session_id: str) -> Run | None:
        live = self._live.get(session_id)
        return live.run if live is not None else None

    async def forget(self, session_id: str) -> None:
        """Close the session's live agent and delete its checkpoints (before a delete); 409
        while it runs a turn."""
        run = self.busy_run(session_id)
        if run is not None:
            raise ApiError(409, f"session busy: {session_id} is running {run.id}", "session_busy")
        live = self._live.pop(session_id, None)
        agent = live.agent if live is not None else self.make_agent(session_id)
        await run_blocking(agent.forget_checkpoints)
        if live is not None:
            await self._close(live)

    def _live_session(self, session_id: str) -> LiveSession:
        live = self._live.get(session_id)
        if live is None:
            live = LiveSession(session_id, self.make_agent(session_id))
            self._live[session_id] = live
        self._live.move_to_end(session_id)
        return live

    async def _evict_idle(self) -> None:
        """Close the least recently used idle agents beyond the limit."""
        excess = len(self._live) - self.settings.max_live_sessions
        for session_id in list(self._live):
            if excess <= 0:
                break
            live = self._live[session_id]
            if live.run is None:
                del self._live[session_id]
                await self._close(live)
                excess -= 1

    async def _close(self, live: LiveSession) -> None:
        try:
            await live.agent.aclose()
        except Exception:
            log.warning("closing the agent of %s failed", live.session_id, exc_info=True)

    def _prune_runs(self) -> None:
        cutoff = time.time() - self.settings.run_retention_s
        finished = [r for r in self.runs.values() if r.finished_at is not None]
        finished.sort(key=lambda r: r.finished_at or 0.0)
        excess = len(self.runs) - RETAINED_RUNS
        for run in finished:
            if (run.finished_at or 0.0) < cutoff or excess > 0:
                del self.runs[run.id]
                excess -= 1

    async def end_runs(self, grace: float = SHUTDOWN_GRACE) -> None:
        """At shutdown: interrupt every running turn and give it `grace` seconds to end (what
        it completed is saved); a run still going then ends with a final `run.failed`, so
        every stream following it closes at once and the server can exit."""
        running = [run for run in self.runs.values() if not run.done]
        for live in self._live.values():
            if live.run is not None:
                live.agent.interrupt(reason=SHUTTING_DOWN)
        tasks = [run.task for run in running if run.task is not None and not run.task.done()]
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
        for run in running:
            run.publish("run.failed", {"error": SHUTTING_DOWN, "usage": {}})  # if still open

    async def aclose(self) -> None:
        """End every run (`end_runs`), stop the turns that outlived it, close every agent."""
        await self.end_runs()
        for run in self.runs.values():
            if run.task is not None and not run.task.done():
                run.task.cancel()
                with contextlib.suppress(BaseException):
                    await run.task
        for live in list(self._live.values()):
            await self._close(live)
        self._live.clear()


def hub_of(request: Any) -> SessionHub:
    """The hub of the app serving this Starlette request."""
    hub: SessionHub = request.app.state.hub
    return hub


def _ignore(event: ev.Event) -> None:
    """The answering subscription only declares who answers; the events come with the turn."""
