"""One ACP session: a talaria Agent, its updates to the editor, and its permission requests.

The agent's events arrive on any thread; they are handled on the server's event loop, in the
order the engine emitted them, and sent to the client one after the other. An approval request
becomes `session/request_permission` behind the tool call it is about; the answer goes back
through `agent.respond`, and a request the engine withdraws (interrupt, timeout) is dropped.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp.schema import AllowedOutcome, PermissionOption, ToolCallUpdate

from talaria.acp.client_tools import EditorSide, editor_tools, recorded_edits
from talaria.acp.describe import describe_call
from talaria.acp.errors import failed, invalid
from talaria.acp.modes import ModeSwitch, sandbox_option
from talaria.acp.prompt import prompt_content
from talaria.acp.updates import (
    CallNotes,
    EventTranslator,
    history_updates,
    subagent_call,
    text_content,
)
from talaria.agent import Agent
from talaria.core import ExitReason, exit_reason, failure_class
from talaria.events import ApprovalRequested, Event, RequestWithdrawn
from talaria.loop.steering import TurnMismatch
from talaria.tools.sandbox import SANDBOX_MODES

log = logging.getLogger("talaria.acp")

PERMISSION_OPTIONS = (
    PermissionOption(option_id="allow-once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="allow-always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="reject-once", name="Reject", kind="reject_once"),
    PermissionOption(option_id="reject-always", name="Always reject", kind="reject_always"),
)
DECISIONS = {
    "allow-once": "once",
    "allow-always": "always",
    "reject-once": "deny",
    "reject-always": "deny",
}
"""talaria keeps no deny rules, so "always reject" rejects this call and the model is told."""


@dataclass(frozen=True)
class SessionSettings:
    """What every session of this server shares (from the command line and the config)."""

    agent_kwargs: dict[str, Any]
    toolsets: list[str]
    images: bool
    open_store: Callable[[], Any]
    """The home's session store (what `session/list` reads)."""
    mcp_servers: dict[str, Any] = field(default_factory=dict)
    """The configured `mcp_servers`, which the editor's servers join (by name, theirs win)."""


class UpdateStream:
    """Session updates to the client, sent one at a time in the order they were pushed.
    An item is an update, or a callable run when its turn comes (it starts a permission
    request exactly after the updates before it)."""

    def __init__(self, conn: Any, session_id: str) -> None:
        self._conn = conn
        self._session_id = session_id
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def push(self, item: Any) -> None:
        """Call on the server's loop only."""
        self._queue.put_nowait(item)

    async def drain(self) -> None:
        await self._queue.join()

    def close(self) -> None:
        self._task.cancel()

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                if callable(item):
                    item()
                else:
                    await self._conn.session_update(session_id=self._session_id, update=item)
            except Exception:
                log.warning("session %s: an update was lost", self._session_id, exc_info=True)
            finally:
                self._queue.task_done()


class AcpSession:
    def __init__(
        self,
        acp_id: str,
        conn: Any,
        caps: Any,
        settings: SessionSettings,
        cwd: Path,
        mcp_servers: dict[str, Any] | None = None,
    ):
        self.id = acp_id
        self.cwd = cwd
        self._editor_servers = mcp_servers or {}
        self._conn = conn
        self._loop = asyncio.get_running_loop()
        self._asks: dict[str, asyncio.Task[None]] = {}
        self._turns = asyncio.Lock()
        """Held by the prompt whose turn runs; the others wait for it in the order they came."""
        self._cancels = 0
        """How many times the editor said cancel: a prompt that saw it change is cancelled."""
        self._idle = asyncio.Event()
        self._idle.set()
        self._images = settings.images
        self.updates = UpdateStream(conn, acp_id)
        notes = CallNotes()
        tools, replaced = editor_tools(EditorSide(conn, acp_id, notes, self.updates.push), caps)
        self._settings = settings
        self._tools = tools
        self._toolsets = [name for name in settings.toolsets if name not in replaced]
        self.modes = ModeSwitch()
        self.agent = self._new_agent(None)
        self.modes.attach(self.agent.approvals)
        self.sandbox = str(self.agent.config.sandbox.mode)
        self._agent_sandbox = self.sandbox
        self._translator = EventTranslator(cwd, notes, recorded_edits(tools))

    def _new_agent(self, sandbox: str | None) -> Agent:
        config = dict(self._settings.agent_kwargs.get("config") or {})
        if sandbox is not None:
            config["sandbox.mode"] = sandbox
        servers = {}
        if self._editor_servers:
            servers["mcp_servers"] = {**self._settings.mcp_servers, **self._editor_servers}
        return Agent(
            **{
                **self._settings.agent_kwargs,
                **servers,
                "config": config,
                "tools": self._tools,
                "toolsets": self._toolsets,
                "cwd": self.cwd,
                "session_id": self.id,
                "plugins": [self.modes],
                "source": "acp",
            }
        )

    def config_options(self) -> list[Any]:
        return [sandbox_option(self.sandbox)]

    def set_sandbox(self, mode: str) -> None:
        """Takes effect from the next turn (a running command keeps the sandbox it has)."""
        if mode not in SANDBOX_MODES:
            raise invalid(f"unknown sandbox mode {mode!r}; modes: {', '.join(SANDBOX_MODES)}")
        self.sandbox = mode

    async def _apply_sandbox(self) -> None:
        """A new agent on the same session with the chosen sandbox: the sandbox is part of
        how an agent is assembled, and the agent's public surface has no setter for it."""
        if self.sandbox == self._agent_sandbox:
            return
        old, mode = self.agent, self.modes.current
        self.agent = self._new_agent(self.sandbox)
        self.modes.attach(self.agent.approvals)
        self.modes.set(mode)
        self._agent_sandbox = self.sandbox
        await old.aclose()

    # ---- the ACP methods --------------------------------------------------------------

    async def prompt(self, blocks: list[Any]) -> str:
        """Run one turn; the stop reason the editor gets. A prompt sent while another runs
        waits for it (prompts run in the order they came, each answered when its own turn
        ends); a cancel answers the running prompt and every waiting one `cancelled`."""
        message = prompt_content(blocks, images=self._images)
        cancels = self._cancels
        async with self._turns:
            if self._cancels != cancels:
                return "cancelled"
            if isinstance(message, str) and message.startswith("/"):
                message = await asyncio.to_thread(self._expand_skill, message)
            self._idle.clear()
            try:
                await self._apply_sandbox()
                turn = self.agent.events(message, answers=("approval",))
                async for event in turn:
                    self._handle(event)
                result: Mapping[str, Any] = turn.result or {}
            except RuntimeError as exc:
                raise invalid(str(exc)) from None
            finally:
                await self.updates.drain()
                self._idle.set()
            return stop_reason(result, cancelled=self._cancels != cancels)

    def _expand_skill(self, text: str) -> str:
        """`/<skill-name> [request]` as the skill's instructions and the request."""
        from talaria.skills.invoke import with_skill

        try:
            return with_skill(text, self.agent.skills)
        except ValueError as exc:
            raise invalid(str(exc)) from None

    def announce_commands(self) -> None:
        """Offer the skills to the editor as commands (`available_commands_update`); call on
        the server's loop once the session exists for the editor."""
        from acp.schema import (
            AvailableCommand,
            AvailableCommandInput,
            AvailableCommandsUpdate,
            UnstructuredCommandInput,
        )

        hint = AvailableCommandInput(UnstructuredCommandInput(hint="what to do with it"))
        commands = [
            AvailableCommand(name=skill.name, description=skill.description, input=hint)
            for skill in self.agent.skills()
        ]
        if commands:
            self.updates.push(
                AvailableCommandsUpdate(
                    session_update="available_commands_update", available_commands=commands
                )
            )

    def cancel(self) -> None:
        self._cancels += 1
        self.agent.interrupt(reason="cancelled by the editor")

    def steer(self, text: str, turn_id: str | None) -> dict[str, str]:
        """`_talaria/steer`: a note the running turn's next model call reads. Refused when no
        turn runs (or `turn_id` names one that has ended): the editor sends a prompt instead."""
        running = self.agent.running_turn
        if running is None:
            raise invalid(f"no turn is running in session {self.id}; send it as a prompt")
        try:
            steer_id = self.agent.steer(text, turn_id=turn_id or running)
        except TurnMismatch as exc:
            raise invalid(str(exc)) from None
        return {"steerId": steer_id, "turnId": turn_id or running}

    async def rewind(
        self, turn: int, files: bool, conversation: bool, step: int | None = None
    ) -> dict[str, Any]:
        """`_talaria/rewind`: back to before turn `turn`, or its step `step` (refused while a
        turn runs)."""
        from talaria.checkpoints import CheckpointError

        if not self._idle.is_set():
            raise invalid(f"session {self.id} is running a turn; cancel it before a rewind")
        try:
            report = await self.agent.arewind(
                turn, files=files, conversation=conversation, step=step
            )
        except KeyError as exc:
            raise invalid(str(exc.args[0])) from None
        except (ValueError, RuntimeError, CheckpointError) as exc:
            raise invalid(str(exc)) from None
        return {
            "restored": list(report.restored),
            "kept": list(report.kept),
            "leftAlone": list(report.left_alone),
            "conversation": report.conversation,
            "undo": report.undo,
            "step": report.step,
            "summary": report.summary(),
        }

    async def end(self) -> None:
        """`session/close`: stop a running turn (its prompt answers `cancelled`), wait for
        it to finish, then release the agent and everything it holds."""
        if not self._idle.is_set():
            self.cancel()
            await self._idle.wait()
        await self.close()

    async def replay(self) -> None:
        """Send the stored conversation as the updates the editor would have seen live."""
        messages = await asyncio.to_thread(self.agent.store.load_messages, self.id)
        for update in history_updates(messages, self.cwd):
            self.updates.push(update)
        await self.updates.drain()

    async def close(self) -> None:
        for task in list(self._asks.values()):
            task.cancel()
        self.updates.close()
        await self.agent.aclose()

    # ---- engine events ------------------------------------------------------------------

    def _handle(self, event: Event) -> None:
        """One event of the running turn's `agent.events()` stream, on the server's loop."""
        if isinstance(event, ApprovalRequested):
            self.updates.push(functools.partial(self._start_asking, event))
        elif isinstance(event, RequestWithdrawn):
            task = self._asks.pop(event.request_id, None)
            if task is not None:
                task.cancel()
        else:
            for update in self._translator.translate(event):
                self.updates.push(update)

    def _start_asking(self, event: ApprovalRequested) -> None:
        pending = {request.request_id for request in self.agent.pending_requests}
        if event.request_id in pending:
            self._asks[event.request_id] = self._loop.create_task(self._ask(event))

    async def _ask(self, event: ApprovalRequested) -> None:
        view = describe_call(event.tool_name, event.arguments, self.cwd)
        call_id, asker = subagent_call(event.subagent, event.call_id)
        tool_call = ToolCallUpdate(
            tool_call_id=call_id,
            title=asker + view.title,
            kind=view.kind,  # type: ignore[arg-type]
            status="pending",
            raw_input=event.arguments,
            content=[text_content(f"{event.reason}: {event.command}")],
        )
        decision = "deny"
        try:
            response = await self._conn.request_permission(
                session_id=self.id, tool_call=tool_call, options=list(PERMISSION_OPTIONS)
            )
            decision = decision_for(response.outcome)
        except asyncio.CancelledError:
            return  # withdrawn by the engine: nothing to answer
        except Exception:
            log.warning("permission request failed; denying", exc_info=True)
        finally:
            self._asks.pop(event.request_id, None)
        self.agent.respond(event.request_id, decision)


def decision_for(outcome: Any) -> str:
    """The talaria decision for the editor's answer (cancelled means deny)."""
    if isinstance(outcome, AllowedOutcome):
        return DECISIONS.get(outcome.option_id, "deny")
    return "deny"


STOP_REASONS: dict[ExitReason, str] = {
    "text_response": "end_turn",
    "max_iterations_reached": "max_turn_requests",
    "interrupted": "cancelled",
}


def stop_reason(result: Mapping[str, Any], *, cancelled: bool) -> str:
    """ACP's stop reason for a finished turn; a failed turn is an error the editor shows."""
    reason = str(result.get("turn_exit_reason", ""))
    if cancelled:
        return "cancelled"
    failure = failure_class(reason)
    if failure == "refusal":
        return "refusal"
    if failure is not None:
        raise failed(f"talaria: {result.get('error') or reason}", reason)
    # loop_detected, halted:...: the agent stopped and said why
    return STOP_REASONS.get(exit_reason(reason), "end_turn")
