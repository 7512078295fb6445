"""The public facade: `Agent(...)`, `chat`, `run_conversation` and their async twins.

The facade only assembles parts (config, model chain, tools, store, hooks) and hands a turn to
the loop. Construction is cheap: the SDKs, the database and the system prompt are set up on
the first turn.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from talaria.callbacks import CallbackSink, answer_with_callbacks
from talaria.config import Config
from talaria.events import Event, Notice
from talaria.interaction import Interactions, Request
from talaria.interrupt import InterruptSignal
from talaria.loop.deferred import Started
from talaria.loop.session import SessionHandle
from talaria.loop.steering import Steering, UserNote
from talaria.plugins.hooks import HookBus
from talaria.policy.approval import ApprovalState
from talaria.spec import AgentSpec, ModelChoice
from talaria.store.base import new_writer_id
from talaria.tools.base import Tool
from talaria.turn_stream import TurnEvents

if TYPE_CHECKING:
    from talaria.agent_tools.delegate import ChildPlan
    from talaria.checkpoints import RewindReport, SessionCheckpoints, TurnSummary
    from talaria.core import Content, Message, TurnResult
    from talaria.events import SubagentOrigin
    from talaria.loop.runtime import Runtime
    from talaria.skills.catalog import Skill
    from talaria.store.base import SessionStore

T = TypeVar("T")
log = logging.getLogger("talaria")


class TurnFailed(RuntimeError):
    """`Agent.chat()` could not produce an answer; the message is the reason, and `result` is
    what `run_conversation` returned (its ``error``, ``turn_exit_reason``, ``messages``)."""

    def __init__(self, result: TurnResult) -> None:
        super().__init__(str(result.get("error") or result.get("turn_exit_reason") or "failed"))
        self.result = result


def _answer(result: TurnResult) -> str:
    if result.get("failed"):
        raise TurnFailed(result)
    return str(result.get("final_response") or "")


class Agent:
    """An agent bound to one model chain, one tool set and one session at a time."""

    def __init__(
        self,
        model: Any = None,
        *,
        provider: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        api_mode: str | None = None,
        tools: Sequence[Any] | None = None,
        toolsets: Sequence[str] | None = None,
        max_iterations: int | None = None,
        fallback_providers: list[dict[str, Any]] | None = None,
        home: str | Path | None = None,
        session_id: str | None = None,
        cwd: str | Path | None = None,
        stream: bool | None = None,
        config: dict[str, Any] | None = None,
        store: SessionStore | None = None,
        plugins: Sequence[Any] | None = None,
        source: str = "api",
        mcp_servers: dict[str, Any] | None = None,
        skills: Sequence[str] | None = None,
        prompt_notes: Sequence[str] = (),
        **callbacks: Callable[..., Any] | None,
    ) -> None:
        """Everything after `model` is a keyword. With `tools` and no `toolsets` the model is
        offered exactly those tools; with neither, every built-in toolset that can work here
        (`toolsets=[...]` names them; `toolsets=[]` offers none). `skills` names skills
        whose instructions a new session's system prompt carries whole (docs/skills.md);
        `prompt_notes` are lines a front end adds at its end."""
        loaded = Config.load(home, overrides=config)
        if mcp_servers is not None:
            loaded.data["mcp_servers"] = dict(mcp_servers)
        if loaded.get("mcp_servers"):
            from talaria.mcp.config import parse_servers

            parse_servers(loaded.get("mcp_servers"))  # one clear error, now
        spec = AgentSpec(
            config=loaded,
            cwd=Path(cwd).resolve() if cwd else Path.cwd(),
            model=ModelChoice(model, provider, base_url, api_key, api_mode),
            fallbacks=tuple(
                fallback_providers if fallback_providers is not None else loaded.fallback_providers
            ),
            tools=tuple(_as_tool(t) for t in tools or ()),
            toolsets=tuple(toolsets) if toolsets is not None else () if tools else None,
            store=store,
            plugins=tuple(plugins or ()),
            max_iterations=(
                loaded.agent.max_iterations if max_iterations is None else max_iterations
            ),
            stream=bool(loaded.agent.stream if stream is None else stream),
            source=source,
            skills=tuple(skills or ()),
            prompt_notes=tuple(prompt_notes),
        )
        self._start(spec, session_id, callbacks)

    @classmethod
    def from_spec(
        cls,
        spec: AgentSpec,
        *,
        session_id: str | None = None,
        hooks: HookBus | None = None,
        **callbacks: Callable[..., Any] | None,
    ) -> Agent:
        """An agent described by `spec` (a delegate child shares its parent's `hooks`)."""
        agent = cls.__new__(cls)
        agent._start(spec, session_id, callbacks, hooks)
        return agent

    def _start(
        self,
        spec: AgentSpec,
        session_id: str | None,
        callbacks: dict[str, Callable[..., Any] | None],
        hooks: HookBus | None = None,
    ) -> None:
        if spec.max_iterations < 1:
            raise ValueError(f"max_iterations must be at least 1, got {spec.max_iterations}")
        self.spec = spec
        self.sink = CallbackSink(callbacks)
        self.interactions = Interactions(self.sink)
        answer_with_callbacks(self.sink, self.interactions, callbacks)
        self.hooks = hooks if hooks is not None else HookBus()
        self.before_queued_turn: Callable[[], Coroutine[Any, Any, None]] | None = None
        """Awaited before each queued message's turn that follows a turn: a front end's
        between-turns check (the gateway compresses a full session there)."""
        self._session_ref = session_id
        self._queue_looked_up: str | None = None
        self._store = spec.store
        self._owns_store = spec.store is None
        self._interrupt = InterruptSignal()
        self._steering = Steering(self.sink)
        self._writer_id = new_writer_id()
        self._turn_lock = threading.Lock()
        self._runtime: Runtime | None = None
        self._session: SessionHandle | None = None
        self._checkpoints: tuple[str, SessionCheckpoints] | None = None
        self.approvals = ApprovalState(
            mode=str(self.config.approvals.mode),
            allowlist=set(self.config.command_allowlist),
            persist_allowlist=self._persist_allowlist,
        )

    @property
    def config(self) -> Config:
        return self.spec.config

    @property
    def home(self) -> Path:
        return self.spec.home

    @property
    def cwd(self) -> Path:
        return self.spec.cwd

    @property
    def source(self) -> str:
        return self.spec.source

    @property
    def max_iterations(self) -> int:
        """Model calls one turn may make."""
        return self.spec.max_iterations

    @property
    def stream(self) -> bool:
        return self.spec.stream

    @property
    def depth(self) -> int:
        """0 for an agent the user built; a delegate child is one deeper than its parent."""
        return self.spec.depth

    @property
    def parent_session_id(self) -> str | None:
        return self.spec.parent_session_id

    # ---- public API -------------------------------------------------------------------

    def chat(self, message: str) -> str:
        """Send one message; return the final answer text ('' when the turn ended without
        one, e.g. interrupted). Raises `TurnFailed` when the turn failed (the model could not
        be reached, the provider refused, ...): an empty string would pass for an answer."""
        return _answer(self.run_conversation(user_message=message))

    async def achat(self, message: str) -> str:
        return _answer(await self.arun_conversation(user_message=message))

    def run_conversation(
        self,
        user_message: str | Sequence[Mapping[str, Any]],
        system_message: str | None = None,
        conversation_history: Sequence[Mapping[str, Any]] | None = None,
        task_id: str | None = None,
    ) -> TurnResult:
        return self._run_sync(
            self.arun_conversation(user_message, system_message, conversation_history, task_id)
        )

    async def arun_conversation(
        self,
        user_message: str | Sequence[Mapping[str, Any]],
        system_message: str | None = None,
        conversation_history: Sequence[Mapping[str, Any]] | None = None,
        task_id: str | None = None,
    ) -> TurnResult:
        content = _checked_content(user_message)
        if not self._turn_lock.acquire(blocking=False):
            raise RuntimeError("this agent is already running a turn; interrupt() it first")
        try:
            result = await self._turn(content, system_message, conversation_history, task_id)
            return await self._queued_turns(result)
        finally:
            self._turn_lock.release()

    async def arun_queued(self) -> TurnResult:
        """Run the messages waiting in this agent's queue, a turn each, in order, as the end
        of a turn does; the result is the last turn's. For a front end that queues from
        another thread: a message queued just after a run looked at the queue for the last
        time waits there (ValueError when none waits)."""
        if not self._turn_lock.acquire(blocking=False):
            raise RuntimeError("this agent is already running a turn; interrupt() it first")
        try:
            note = self._kept_queue().take_queued()
            if note is None:
                raise ValueError("no message is queued")
            return await self._queued_turns(await self._queued_turn(note))
        finally:
            self._turn_lock.release()

    async def _queued_turns(self, result: TurnResult) -> TurnResult:
        """After a turn, the queued messages' turns (while the turns end in a way that lets
        the queue run); the last result."""
        while (note := self._steering.next_message(result["turn_exit_reason"])) is not None:
            if self.before_queued_turn is not None:
                await self.before_queued_turn()
            result = await self._queued_turn(note)
        return result

    async def _queued_turn(self, note: UserNote) -> TurnResult:
        task = self._ensure_runtime().new_id()
        self._steering.started(note, task)
        return await self._turn(note.text, None, None, task)

    async def _turn(
        self,
        content: Content,
        system_message: str | None,
        conversation_history: Sequence[Mapping[str, Any]] | None,
        task_id: str | None,
    ) -> TurnResult:
        from talaria.assembly import agent_services
        from talaria.loop.turn import busy_result, result_dict, run_turn
        from talaria.store.base import SessionBusy
        from talaria.tools.process_tracking import kill_owned

        self._interrupt.clear()
        runtime, session = await self._opened(system_message, conversation_history)
        self._steering.attach(session.store, session.id)
        task = task_id or runtime.new_id()
        try:
            await session.begin_turn(self._writer_id)
        except SessionBusy as busy:
            return busy_result(busy, session, task)
        self._steering.begin_turn(task)
        begun = await self._begin_checkpoint(runtime, session, content)
        runtime.request_sent = begun.start
        runtime.before_tools = functools.partial(self._step_checkpoint, runtime, begun)
        try:
            agent_services(runtime).session_id = session.id
            state = await run_turn(runtime, session, content, task)
        finally:
            self._steering.end_turn()
            runtime.before_tools = runtime.request_sent = None
            kill_owned(session.id, background=False)  # nothing of the turn outlives it
            if await begun.result():
                await self._checkpoint(runtime, lambda c: c.end_turn())
            await _release_quietly(session)
        self._record_turn(session, state)
        return result_dict(state, session, self._interrupt.message)

    def events(
        self,
        user_message: str | Sequence[Mapping[str, Any]],
        *,
        system_message: str | None = None,
        conversation_history: Sequence[Mapping[str, Any]] | None = None,
        task_id: str | None = None,
        answers: Sequence[str] = (),
    ) -> TurnEvents:
        """One turn as a stream: `async for event in agent.events("...")` yields its typed
        events (`talaria.events`) as they happen, then `.result` is its `TurnResult`.
        `answers` ("approval", "clarify") says that the consumer answers those requests with
        `respond`; otherwise nobody is asked (approvals are denied, clarify is not offered)."""

        async def run() -> TurnResult:
            if self._runtime is None:  # assembling (SDK, tools, plugins) is ~100 ms of CPU:
                from talaria.offload import run_blocking  # off the loop, after `answers`

                await run_blocking(self.warm_up)
            return await self.arun_conversation(
                user_message, system_message, conversation_history, task_id
            )

        return TurnEvents(run, self.subscribe, self.interrupt, answers)

    def queued_events(self, *, answers: Sequence[str] = ()) -> TurnEvents:
        """`arun_queued` as a stream, as `events` streams one message: the turns of the
        messages waiting in the queue, in order; `.result` is the last turn's."""
        return TurnEvents(self.arun_queued, self.subscribe, self.interrupt, answers)

    def respond(self, request_id: str, answer: object) -> bool:
        """Answer a pending approval ("once" | "session" | "always" | "deny") or clarify
        request (text) from any thread or front end. False when it is no longer pending
        (answered elsewhere, withdrawn); ValueError when the answer does not fit."""
        return self.interactions.respond(request_id, answer)

    @property
    def pending_requests(self) -> list[Request]:
        """The approval and clarify requests waiting for an answer right now."""
        return self.interactions.pending()

    def subscribe(
        self, listener: Callable[[Event], None], answers: Sequence[str] = ()
    ) -> Callable[[], None]:
        """Receive every engine event; `answers` ("approval", "clarify") declares that this
        front end answers those requests through `respond` (subscribe before the first turn
        for clarify to be offered). Returns the unsubscribe function."""
        self.sink.listeners.append(listener)
        remove_responder = self.interactions.add_responder(answers)

        def unsubscribe() -> None:
            remove_responder()
            if listener in self.sink.listeners:
                self.sink.listeners.remove(listener)

        return unsubscribe

    def child(self, session_id: str, plan: ChildPlan, origin: SubagentOrigin) -> Agent:
        """A `delegate_task` child working for session `session_id` as `plan` says
        (`AgentSpec.child`): this agent's config, hooks, store, MCP servers and command
        allowlist; its own budget and session. Its approval and clarify requests are this
        agent's, naming `origin`, so this agent's front ends answer them (with nobody to
        answer, or a plan that asks nobody, the headless rule denies)."""
        spec = self.spec.child(
            plan=plan,
            parent_session_id=session_id,
            store=self.store,
            shared_tools=self._runtime.tool_source if self._runtime is not None else None,
        )
        child = Agent.from_spec(spec, hooks=self.hooks)
        child.interactions = self.interactions.for_subagent(origin, answered=plan.ask_user)
        child.approvals.allowlist = self.approvals.allowlist
        return child

    def interrupt(
        self, message: str | None = None, *, turn_id: str | None = None, reason: str | None = None
    ) -> None:
        """Stop the running turn cleanly (thread-safe). `message` is what the user said
        instead: it runs as the next turn once this one has stopped. `reason` only says why
        (the result's `interrupt_message`). With `turn_id`, a turn that is not the one
        running is refused (`TurnMismatch`): a late click stops nothing by mistake."""
        if message is not None:
            self._steering.interrupting(message, turn_id)
        else:
            self._steering.inbox.check_turn(turn_id)
        self._interrupt.set(message if message is not None else reason)

    def steer(self, text: str, *, turn_id: str | None = None) -> str:
        """Add a note for the running turn (thread-safe): the model reads it with its next
        call, after the current tool results. With no model call left (or no turn running)
        it becomes a queued message, and a `MessageQueued` event says so. Returns the id the
        `SteerAccepted`/`SteerDelivered` (or `MessageQueued`) events name it by."""
        return self._steering.steer(text, turn_id)

    def queue(self, text: str) -> str:
        """Run `text` as a turn of its own once the running one ends (thread-safe; kept in
        the store with the session until it runs). Returns its id (`MessageQueued`)."""
        return self._kept_queue().queue(text)

    @property
    def queued_messages(self) -> list[str]:
        """The messages waiting to run, in order (with those a stored session kept)."""
        return [note.text for note in self.queued]

    @property
    def queued(self) -> list[UserNote]:
        """The waiting messages with their ids (`remove_queued`, `edit_queued` name them)."""
        return self._kept_queue().inbox.queued()

    def clear_queue(self) -> int:
        """Take back every waiting message (in memory and in the store); how many."""
        return self._kept_queue().clear()

    def remove_queued(self, message_id: str) -> bool:
        """Take back one waiting message; False when it has started (or is unknown)."""
        return self._kept_queue().remove(message_id)

    def edit_queued(self, message_id: str, text: str) -> bool:
        """New words for a waiting message, in its place; False when it has started."""
        return self._kept_queue().edit(message_id, text)

    def run_queued(self) -> TurnResult:
        """`arun_queued` for callers without an event loop."""
        return self._run_sync(self.arun_queued())

    def _kept_queue(self) -> Steering:
        """The steering with the queue of the session this agent is on, also before its
        first turn (a resumed session's kept messages are listed and edited at once). The
        store is asked once per session named: a screen lists the queue on every refresh, and
        the queue itself lives in the steering inbox, which every change goes through."""
        session = self._session
        ref = self._session_ref
        if session is not None:
            self._steering.attach(session.store, session.id)
        elif ref is not None and ref != self._queue_looked_up:
            store = self.store
            if store.get_session(ref) is not None:
                self._steering.attach(store, ref)
            self._queue_looked_up = ref
        return self._steering

    @property
    def running_turn(self) -> str | None:
        """The task id of the turn running now (what `steer`/`interrupt` may name)."""
        return self._steering.inbox.running_turn

    def add_side_usage(self, usage: Any) -> None:
        """Count usage spent on this agent's behalf (children, side tasks) in the turn."""
        if self._runtime is not None:
            self._runtime.add_side_usage(usage)

    def new_session(self) -> None:
        """Start a fresh session on the next turn (the old one stays in the store)."""
        self._end_session("new_session")
        self._session_ref = None
        self._queue_looked_up = None
        self._session = None

    @property
    def session_id(self) -> str | None:
        """The current session (it changes when compression continues in a child session)."""
        return self._session.id if self._session is not None else self._session_ref

    @session_id.setter
    def session_id(self, value: str | None) -> None:
        """Name the session the next turn resumes or starts (id, title or 'latest')."""
        if self._session is not None and value != self._session.id:
            self._end_session("switched")
            self._session = None
        self._session_ref = value
        self._queue_looked_up = None

    @property
    def tools(self) -> dict[str, Tool]:
        """The tools this agent offers the model, by name, in the order the model sees them.
        Outside an event loop the prompt profile is settled first (a small window gets the
        lean set), so this is what the model gets, also before the first turn."""
        runtime = self._ensure_runtime()
        if runtime.profile is None and not _loop_running():
            from talaria.loop.profile import ensure_profile

            self._run_sync(ensure_profile(runtime, [tool.name for tool in self.spec.tools]))
        return dict(runtime.tools)

    @property
    def tool_source(self) -> Any:
        """Where tools that change between turns come from (the MCP servers; None: none)."""
        return self._ensure_runtime().tool_source

    def warm_up(self) -> None:
        """Assemble everything the first turn needs now (SDK import, tools, store)."""
        self._ensure_runtime()

    def compress(self, focus: str | None = None) -> bool:
        """Compress the current session's history now (False when there was nothing to do)."""
        return self._run_sync(self.acompress(focus))

    async def acompress(self, focus: str | None = None) -> bool:
        """`compress` on the caller's event loop (between turns)."""
        runtime, session = self._runtime, self._session
        if runtime is None or session is None or not session.history:
            return False
        if runtime.context is None:
            raise ValueError("compression is turned off (compression.enabled: false)")
        return bool(await runtime.context.compress(runtime, session, None, focus))

    async def context_fill(self) -> float | None:
        """The share of the model's window the session's context takes now (None: unknown,
        no turn yet, or no context engine): what a front end checks between turns."""
        runtime, session = self._runtime, self._session
        if runtime is None or session is None or runtime.context is None:
            return None
        return await runtime.context.fill(runtime, session)

    def truncate(self, keep: int) -> None:
        """Keep only the first `keep` messages of the current session, in memory and in the
        store (undo, retry): a resumed session does not bring the dropped exchange back."""
        self._run_sync(self._truncate(keep, None))

    async def _truncate(self, keep: int, seq: int | None) -> None:
        """Keep the first `keep` messages of the history, or (with `seq`) those the store
        numbers below `seq`."""
        session = self._session
        if session is None:
            ref = self._session_ref
            if ref and self.store.get_session(ref) is not None:
                self.store.truncate_messages(ref, keep if seq is None else seq)
            return
        await session.flush()
        first_seq = max(0, session.next_seq - len(session.history))
        if seq is not None:
            if seq < first_seq:
                raise ValueError("that turn's messages were compressed into a summary")
            keep = seq - first_seq
        if session.store is not None:
            session.store.truncate_messages(session.id, first_seq + keep)
        session.history = session.history[:keep]
        session.next_seq = first_seq + len(session.history)

    def rewind(
        self,
        turn: int,
        *,
        files: bool = True,
        conversation: bool | None = None,
        step: int | None = None,
    ) -> RewindReport:
        """Go back to before turn `turn` (an id from `checkpoints()`): its files as they were
        then (what the agent changed since; the user's own later edits stay), the conversation
        as it was then, or both (the default). With `step` (from 1, `TurnSummary.steps`), the
        files as they were before that step of the turn (files only). The files as they are
        now are checkpointed first, so a rewind of the files can be undone
        (`RewindReport.undo`)."""
        return self._run_sync(self.arewind(turn, files=files, conversation=conversation, step=step))

    async def arewind(
        self,
        turn: int,
        *,
        files: bool = True,
        conversation: bool | None = None,
        step: int | None = None,
    ) -> RewindReport:
        if conversation is None:
            conversation = step is None
        if not self._turn_lock.acquire(blocking=False):
            raise RuntimeError("this agent is running a turn; interrupt() it before a rewind")
        try:
            checkpoints = await self._session_checkpoints()
            target = checkpoints.journal.get(turn)
            report = await asyncio.to_thread(
                functools.partial(
                    checkpoints.rewind, turn, files=files, conversation=conversation, step=step
                )
            )
            if conversation:
                await self._truncate(0, target.seq)
            return report
        finally:
            self._turn_lock.release()

    def skills(self) -> list[Skill]:
        """The skills this agent can use, by name: the project's, the home's and the
        plugins' (docs/skills.md). Looked up again on each call."""
        from talaria.assembly import skill_catalog

        return skill_catalog(self.home, self.cwd, self.hooks.skill_dirs).skills()

    def checkpoints(self) -> list[TurnSummary]:
        """The session's checkpoints, oldest first: each turn (and each rewind) with the
        files the agent changed in it."""
        return self._run_sync(self.acheckpoints())

    async def acheckpoints(self) -> list[TurnSummary]:
        checkpoints = await self._session_checkpoints()
        return await asyncio.to_thread(checkpoints.turns)

    def diff(self, since: int | None = None) -> str:
        """What the agent changed in this session's files (since turn `since`), as a
        unified diff."""
        return self._run_sync(self.adiff(since))

    async def adiff(self, since: int | None = None) -> str:
        checkpoints = await self._session_checkpoints()
        return await asyncio.to_thread(checkpoints.diff, since)

    def forget_checkpoints(self) -> None:
        """Delete the current session's checkpoints (when the session is deleted)."""
        from talaria.checkpoints import remove_session

        if self.session_id:
            remove_session(self.home, self.session_id)
        self._checkpoints = None

    async def _session_checkpoints(self) -> SessionCheckpoints:
        """The current session's checkpoints (the stored session's, before its first turn)."""
        runtime = self._ensure_runtime()
        if self._session is None and self._session_ref is None:
            raise ValueError("no session yet: nothing to rewind")
        session_id = self._session.id if self._session else str(self._session_ref)
        if self._checkpoints is None or self._checkpoints[0] != session_id:
            from talaria.assembly import open_checkpoints

            opened = await asyncio.to_thread(open_checkpoints, self, runtime, session_id)
            self._checkpoints = (session_id, opened)
        return self._checkpoints[1]

    async def _begin_checkpoint(
        self, runtime: Runtime, session: SessionHandle, content: Content
    ) -> Started[bool]:
        """The snapshot of the files as the turn begins. It starts once the turn's first
        request is on its way (`Runtime.request_sent`), so that its git and imports do not
        delay that request, and at the latest when a step's tools are about to run, which
        wait for it (`_step_checkpoint`). A hook that runs before the model call may change
        files, so with one it is taken first."""
        seq = session.next_seq + session.unsaved
        prompt = _prompt_text(content)
        begun = Started(lambda: self._checkpoint(runtime, lambda c: c.begin_turn(seq, prompt)))
        if runtime.hooks.has("user_prompt_submit") or runtime.hooks.has("pre_llm_call"):
            await begun.result()
        return begun

    async def _checkpoint(
        self, runtime: Runtime, take: Callable[[SessionCheckpoints], object]
    ) -> bool:
        """Snapshot the writable roots as a turn begins or ends (`take` does it, in a thread);
        a failure is a warning (the turn runs without a restore point), never the turn's
        end."""
        from talaria.events import Notice

        try:
            checkpoints = await self._session_checkpoints()
            await asyncio.to_thread(take, checkpoints)
            return True
        except Exception as exc:
            if not _checkpoint_failed(exc):
                raise
            runtime.emit(Notice("warning", f"no checkpoint of the files this turn: {exc}"))
            return False

    async def _step_checkpoint(
        self, runtime: Runtime, begun: Started[bool], names: list[str]
    ) -> None:
        """Before a step whose tools change files (`assembly.writes_files`), a checkpoint of
        the files (a failure is a warning: the step runs, the turn's own checkpoints still
        hold). The turn's first snapshot is complete before any tool runs."""
        from talaria.assembly import writes_files

        if not await begun.result():
            return
        writing = [name for name in names if writes_files(runtime.tools.get(name))]
        if not writing:
            return
        try:
            checkpoints = await self._session_checkpoints()
            if checkpoints.enabled:
                await asyncio.to_thread(checkpoints.before_step, ", ".join(writing))
        except Exception as exc:
            if not _checkpoint_failed(exc):
                raise
            runtime.emit(Notice("warning", f"no checkpoint before this step: {exc}"))

    def _run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run on the process's shared background loop (`talaria.background`): connections
        stay alive across turns with no loop or thread per agent. From inside a running loop
        that would freeze the caller's loop for the whole turn: refuse."""
        if _loop_running():
            coro.close()
            raise RuntimeError(
                "Agent.chat()/run_conversation()/compress() were called from inside a running "
                "event loop, which they would block for the whole turn; use "
                "`await agent.achat(...)` / `await agent.arun_conversation(...)` instead"
            )
        from talaria.background import run_sync

        return run_sync(coro)

    @property
    def messages(self) -> list[Message]:
        return list(self._session.history) if self._session else []

    @property
    def store(self) -> SessionStore:
        if self._store is None:
            from talaria.store.factory import configured_store

            self._store = configured_store(self.config)
        return self._store

    @property
    def unsaved_messages(self) -> int:
        """Messages of the session the store does not hold (it failed); saving is retried
        with the next turn and at `close()`."""
        return self._session.unsaved if self._session is not None else 0

    def close(self) -> None:
        """End the session and release connections, threads, processes and the database.
        Never raises: a failure is logged (the session's messages are already stored)."""
        if not _loop_running() and (self._runtime is not None or self._session is not None):
            _quietly("finishing the session", self._run_sync, self._finish())
        self._release()

    async def aclose(self) -> None:
        """`close` for agents driven from your own event loop (`achat`, `arun_conversation`)."""
        await self._finish()
        self._release()

    async def _finish(self) -> None:
        """Save what the store still lacks (a failed save is retried once more) and close the
        model clients; failures are logged."""
        session = self._session
        try:
            if session is not None and session.store is not None:
                await session.flush()
                session.store.release_writer(session.id, self._writer_id)  # if a turn could not
        except Exception as exc:
            log.warning("session %s: %d message(s) not saved: %s", self.session_id,
                        self.unsaved_messages, exc)  # fmt: skip
        try:
            if self._runtime is not None:
                await self._runtime.caller.chain.aclose()
        except Exception as exc:
            log.warning("closing the model clients failed: %s", exc)

    def _release(self) -> None:
        from talaria.tools.process_tracking import kill_owned

        self._end_session("closed")
        if self._session is not None:
            kill_owned(self._session.id)
        if self._runtime is not None:
            self._runtime.close()
        if self._store is not None and self._owns_store:
            _quietly("closing the store", self._store.close)
            self._store = None

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ---- assembly ---------------------------------------------------------------------

    def _ensure_runtime(self) -> Runtime:
        if self._runtime is None:
            from talaria.assembly import assemble_runtime

            self._runtime = assemble_runtime(self, self._interrupt)
            self._runtime.steering = self._steering.inbox
        return self._runtime

    async def astart_session(self) -> str:
        """Open the session now (create it in the store, or load the stored one) instead of at
        the first turn, and return its id: a front end that hands the id out before any turn
        (ACP's session/new) makes it listable and resumable at once."""
        if not self._turn_lock.acquire(blocking=False):
            raise RuntimeError("this agent is already running a turn; interrupt() it first")
        try:
            _, session = await self._opened(None, None)
            return session.id
        finally:
            self._turn_lock.release()

    async def _opened(
        self,
        system_message: str | None,
        conversation_history: Sequence[Mapping[str, Any]] | None,
    ) -> tuple[Runtime, SessionHandle]:
        """The runtime and the session a turn runs on (the prompt profile settled first: the
        system prompt a new session stores depends on it)."""
        from talaria.loop.profile import ensure_profile

        runtime = self._ensure_runtime()
        await ensure_profile(runtime, [tool.name for tool in self.spec.tools])
        session = await self._ensure_session(runtime, system_message, conversation_history)
        return runtime, session

    async def _ensure_session(
        self,
        runtime: Runtime,
        system_message: str | None,
        conversation_history: Sequence[Mapping[str, Any]] | None,
    ) -> SessionHandle:
        from talaria.assembly import open_session

        if self._session is None:
            self._session = open_session(self, runtime, system_message, self._session_ref)
            self.hooks.emit("on_session_start", session_id=self._session.id)
        elif system_message is not None:
            self._session.system_prompt = system_message
        if conversation_history is not None:
            await self._session.use_history(conversation_history)
        return self._session

    def _record_turn(self, session: SessionHandle, state: Any) -> None:
        """Add the turn's usage to the session's totals (a failed save is logged, not raised:
        the turn's messages are already stored)."""
        from talaria.core import Usage
        from talaria.store.base import StoreError, UsageRecord

        try:
            info = self.store.get_session(session.id)
            totals = Usage.from_dict(info.usage if info and info.usage else {})
            totals.add(state.usage)
            self.store.update_session(
                session.id,
                usage=totals.to_dict(),
                model=state.model or None,
                api_mode=state.api_mode or None,
                provider=state.provider or None,
            )
            self.store.record_usage(
                session.id,
                [
                    UsageRecord(session.id, model, provider, calls, usage.to_dict())
                    for (model, provider), (usage, calls) in state.models.entries.items()
                ],
            )
        except StoreError as exc:
            log.warning("session %s: usage totals not saved: %s", session.id, exc)

    def _end_session(self, reason: str) -> None:
        if self._session is None:
            return
        from talaria.tools.builtin.processes import kill_session_processes
        from talaria.tools.session_end import end_session

        kill_session_processes(self._session.id)
        end_session(self._session.id)
        self.approvals.end_session()
        if self._store is not None:
            _quietly(
                "recording the session end",
                self._store.update_session,
                self._session.id,
                end_reason=reason,
                ended=True,
            )
            self.hooks.emit("on_session_end", session_id=self._session.id)

    def _persist_allowlist(self, command: str) -> None:
        """Add the grant to the file as it is now (other agents may have added theirs)."""
        from talaria.config_write import add_to_config_list

        add_to_config_list(self.home / "config.yaml", "command_allowlist", command)


AIAgent = Agent


def _as_tool(obj: Any) -> Tool:
    if isinstance(obj, Tool):
        return obj
    from talaria.tools.registry import as_tool

    return as_tool(obj)


def _checked_content(message: object) -> Content:
    """A string, or OpenAI-style content parts (text and image_url) for a multimodal turn."""
    if isinstance(message, str):
        return message
    if not isinstance(message, list):
        raise TypeError("user_message must be a string or a list of content parts")
    from talaria.messages.validate import content_problem

    problem = content_problem(message, may_be_empty=False)
    if problem:
        raise ValueError(f"user_message: {problem}")
    return cast("Content", message)


def _prompt_text(content: Content) -> str:
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))


def _checkpoint_failed(exc: Exception) -> bool:
    """A snapshot's own failure (git missing or failing, a file it cannot read), which is a
    warning. The checkpoint code is imported in the snapshot's thread, here only on a failure:
    the turn's first request never waits for it."""
    from talaria.checkpoints import CheckpointError

    return isinstance(exc, (CheckpointError, OSError, ValueError))


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _quietly(what: str, step: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Run one clean-up step; a failure is one log line, never an exception."""
    try:
        step(*args, **kwargs)
    except Exception as exc:
        log.warning("%s failed: %s", what, exc)


async def _release_quietly(session: SessionHandle) -> None:
    from talaria.store.base import StoreError

    try:
        await session.end_turn()
    except StoreError:
        log.warning("session %s: the writer lease was not released", session.id, exc_info=True)
