"""One chat (platform, chat, thread): its session, its running turn, its questions, its
commands. Messages of a chat are handled one at a time, in the order they came."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from talaria import events as ev
from talaria.gateway import access, files
from talaria.gateway.delivery import Outbox
from talaria.gateway.platform import Button, ButtonPress, ChatRef, Inbound, SendsFiles
from talaria.gateway.settings import BUSY_MODES, PlatformSettings, RoomSettings
from talaria.gateway.view import ChatUI, TurnView, Typing
from talaria.interaction import asked_by
from talaria.loop.session import new_session_id
from talaria.offload import run_blocking
from talaria.skills.invoke import with_skill
from talaria.store.base import SessionStore
from talaria.store.ledger import DROPPED, DeliveryLedger, OutboundPart
from talaria.store.schema import USAGE_BUCKETS
from talaria.turn_stream import TurnEvents

if TYPE_CHECKING:
    from talaria.agent import Agent

Content = str | list[dict[str, Any]]
"""A turn's user message: text, or text and image parts."""


class GatewayStore(SessionStore, DeliveryLedger, Protocol):
    """A session store with the delivery ledger (both SQL stores)."""


log = logging.getLogger("talaria.gateway")

AgentFactory = Callable[[str, "str | None", tuple[str, ...]], "Agent"]
"""Builds the agent of a session id, on a model (None: the configured one), with the chat's
lines for the end of its system prompt (`Agent(prompt_notes=...)`)."""
TYPING_EVERY_S = 4.0
ANSWERS = ("approval", "clarify")
"""The requests a chat answers (buttons or commands)."""
COMMAND_MARKS = "/!"
"""`/new` or `!new` (IRC and some clients keep `/` for their own commands)."""
FILES_REFUSED = "this chat platform cannot carry files from the bot."
APPROVAL_BUTTONS = (("Allow once", "once"), ("Allow for this chat", "session"), ("Deny", "deny"))
BUSY_ACKS = {
    "queue": "Queued: I will answer this when the current task is done.",
    "interrupt": "Stopping the current task to answer this.",
    "steer": "Noted: I am adding this to the task in progress.",
}
HELP = """Commands:
/new - start a new conversation
/stop - stop the task in progress
/model [name] - show or change this chat's model
/usage - tokens and cost of this conversation
/resume [id] - continue an earlier conversation
/busy [queue|interrupt|steer] - what a message does while I am working
/approve N [session] - allow request N (/deny N to refuse it)
/help - this list"""


@dataclass
class Pending:
    """An approval or clarify question shown in the chat."""

    request_id: str
    kind: str
    text: str
    message_id: str | None
    choices: tuple[str, ...] = ()


@dataclass
class GatewayContext:
    """What every chat of one platform shares."""

    settings: PlatformSettings
    ui: Callable[[ChatRef], ChatUI]
    outbox: Outbox
    store: GatewayStore
    make_agent: AgentFactory
    compress_at: float = 0.85
    """Between turns, a session whose context fills more of the window is compressed."""


class ChatSession:
    def __init__(self, ctx: GatewayContext, chat: ChatRef) -> None:
        self.ctx = ctx
        self.chat = chat
        self.ui = ctx.ui(chat)
        self.typing = Typing(self.ui, TYPING_EVERY_S)
        self.session_id: str | None = None
        self.room = ctx.settings.rooms.get(chat.chat_id, RoomSettings())
        self.agent: Agent | None = None
        self.run: asyncio.Task[None] | None = None
        self.generation = 0
        """Bumped by /new and /resume: a turn of an older generation sends nothing."""
        self.taken: list[str] = []
        """Inbound ids of the running run not yet answered."""
        self.waiting: dict[str, str] = {}
        """Queued message id -> the inbound id it came from (not yet started)."""
        self.turn_started = asyncio.Event()
        """Set once the run's first turn runs: a message before that waits for it."""
        self.finishing = False
        """The run's last turn has answered and nothing waits: a new message is no busy one."""
        self.stale_agent = False
        """The model changed: the next turn gets a new agent (this one may still run)."""
        self.requests: dict[str, Pending] = {}
        self._numbers = itertools.count(1)
        self.inbox: asyncio.Queue[Inbound | ButtonPress] = asyncio.Queue()
        self.worker: asyncio.Task[None] | None = None

    # ---- the chat's queue -----------------------------------------------------------------

    def put(self, update: Inbound | ButtonPress) -> None:
        self.inbox.put_nowait(update)
        if self.worker is None or self.worker.done():
            self.worker = asyncio.create_task(self._work())

    async def _work(self) -> None:
        while not self.inbox.empty():
            update = self.inbox.get_nowait()
            try:
                if isinstance(update, ButtonPress):
                    await self._pressed(update)
                else:
                    await self._message(update)
            except Exception:
                log.exception("%s: handling an update failed", self.chat.platform)

    # ---- state ----------------------------------------------------------------------------

    @property
    def settings(self) -> PlatformSettings:
        return self.ctx.settings

    @property
    def busy_mode(self) -> str:
        return self.room.busy or self.settings.busy

    @property
    def model(self) -> str | None:
        return self.room.model or self.settings.model

    async def _load(self) -> None:
        if self.session_id is not None:
            return
        saved = await run_blocking(self.ctx.store.ledger_chat, self.chat.key)
        if saved is None:
            self.session_id = new_session_id()
            await self._save()
            return
        self.session_id = saved["session_id"] or new_session_id()
        stored = saved["settings"]
        self.room = RoomSettings(
            stored.get("model") or self.room.model,
            stored.get("prompt") or self.room.prompt,
            stored.get("busy") or self.room.busy,
        )

    async def _save(self) -> None:
        room = {"model": self.room.model, "prompt": self.room.prompt, "busy": self.room.busy}
        await run_blocking(
            self.ctx.store.ledger_set_chat, self.chat.key, self.chat.platform, self.session_id, room
        )

    async def _agent(self) -> Agent:
        """The chat's agent (called as a turn starts: the previous one has ended)."""
        await self._load()
        if self.stale_agent:
            self.stale_agent = False
            await self._drop_agent()
        if self.agent is None:
            assert self.session_id is not None
            self.agent = self.ctx.make_agent(self.session_id, self.model, self.prompt_notes)
            # the chat answers questions: declared before the session opens, or the agent
            # assembles clarify as unanswerable
            self.agent.subscribe(_answered_elsewhere, answers=ANSWERS)
            # queued messages run in the same run: each is checked as a new message is
            self.agent.before_queued_turn = functools.partial(self._compress_if_full, self.agent)
            await run_blocking(self.agent.warm_up)
        return self.agent

    async def _drop_agent(self) -> None:
        agent, self.agent = self.agent, None
        if agent is not None:
            with contextlib.suppress(Exception):
                await agent.aclose()

    # ---- messages -------------------------------------------------------------------------

    async def _message(self, message: Inbound) -> None:
        text = access.strip_address(self.settings, message.text).strip()
        await self._load()
        if text[:1] in COMMAND_MARKS and await self._command(message, text):
            await self._finish(message)
            return
        if not message.attachments and await self._answers_clarify(message, text):
            await self._finish(message)
            return
        while self.run is not None and not self.run.done() and self.finishing:
            await asyncio.wait([self.run])  # answered: only its bookkeeping is left
        if self.run is not None and not self.run.done():
            await self._turn_or_end(self.run)
        if self.run is not None and not self.run.done():
            content = await self._take_files(message, text)
            if content is None:
                await self._finish(message)
                return
            await self._while_busy(message, content if isinstance(content, str) else _text(content))
            return
        try:
            await self._agent()  # built before a next message can find the chat busy
        except Exception as exc:
            await self._failed(exc)
            await self._finish(message)
            return
        content = await self._take_files(message, text)
        if content is None:
            await self._finish(message)
            return
        self.taken = [message.message_id]
        self.run = asyncio.create_task(self._run(content))

    @property
    def prompt_notes(self) -> tuple[str, ...]:
        """What the agent is told of this chat in every session's system prompt: how to send
        a file back, where the platform can (one line, the same at every turn)."""
        if not self.sends_files:
            return ()
        return (files.how_to_send(self.settings.type, files.chat_folder(Path(), self.chat)),)

    @property
    def folder(self) -> Path:
        """The chat's folder for files, in the agent's working directory."""
        assert self.agent is not None
        return files.chat_folder(self.agent.cwd, self.chat)

    async def _take_files(self, message: Inbound, text: str) -> Content | None:
        """The turn's user message with the message's files saved in the chat's folder (a
        file refused is said in the chat); None when nothing is left to answer."""
        if not message.attachments:
            return text
        taken: list[files.Received] = []
        for number, attachment in enumerate(message.attachments):
            try:
                if files.too_large(attachment):
                    raise ValueError(f"it is over the {files.MAX_FILE_BYTES >> 20} MB limit")
                data = await files.fetched(attachment)
                if len(data) > files.MAX_FILE_BYTES:
                    raise ValueError(f"it is over the {files.MAX_FILE_BYTES >> 20} MB limit")
                path = await run_blocking(files.save, self.folder, attachment.name, data)
            except Exception as exc:
                key = f"file:{self.chat.platform}:{message.message_id}:{number}"
                await self.say(
                    f"I could not take {attachment.name}: {exc}", key, message.message_id
                )
                continue
            taken.append(files.received(path, data))
        if not taken and not text:
            return None
        return files.user_content(text, taken)

    async def _turn_or_end(self, run: asyncio.Task[None]) -> None:
        """Until the run's turn has started (the agent can queue, steer or interrupt it) or
        the run has ended (the message starts a run of its own)."""
        started = asyncio.ensure_future(self.turn_started.wait())
        await asyncio.wait([started, run], return_when=asyncio.FIRST_COMPLETED)
        started.cancel()

    async def _while_busy(self, message: Inbound, text: str) -> None:
        agent = self.agent
        assert agent is not None
        mode = self.busy_mode
        self.taken.append(message.message_id)
        if mode == "queue":
            self.waiting[agent.queue(text)] = message.message_id
        elif mode == "steer":
            agent.steer(text)
        else:
            agent.interrupt(text)
        # through the ledger, as answers go: a flood wait or a restart delays it, never loses it
        ack = f"ack:{self.chat.platform}:{message.message_id}"
        await self.say(BUSY_ACKS[mode], ack, message.message_id)

    async def say(self, text: str, key: str, reply_to: str | None = None) -> None:
        """A reply of the gateway's own (an acknowledgement, help): kept in the ledger too."""
        chat = self.chat
        part = OutboundPart(key, chat.platform, chat.chat_id, chat.thread_id, text, reply_to)
        await self.ctx.outbox.post([part])

    async def _finish(self, message: Inbound) -> None:
        await run_blocking(
            self.ctx.store.ledger_finish_inbound, self.chat.platform, message.message_id
        )

    # ---- the turn -------------------------------------------------------------------------

    async def _run(self, text: Content | None) -> None:
        """One run: `text`'s turn (None: the messages waiting in the agent's queue), then
        each queued message's, until none waits."""
        generation = self.generation
        self.finishing = False
        self.turn_started.clear()
        view = TurnView(self.ui)
        self.typing.show()
        agent: Agent | None = None
        try:
            agent = await self._agent()
            await self._compress_if_full(agent)
            async for event in await self._events(agent, text):
                await self._on_event(event, view, generation)
        except Exception as exc:
            await self._failed(exc)
        finally:
            await self.typing.end()
            waiting = set(self.waiting.values())
            done = [m for m in self.taken if m not in waiting]
            self.taken = [m for m in self.taken if m in waiting]
            for message_id in done:
                await run_blocking(
                    self.ctx.store.ledger_finish_inbound, self.chat.platform, message_id
                )
        if agent is not None and generation == self.generation and agent.queued_messages:
            # queued just as the run looked at its queue for the last time
            self.run = asyncio.create_task(self._run(None))

    async def _failed(self, exc: Exception) -> None:
        log.exception("%s: a turn failed", self.chat.platform, exc_info=exc)
        await self.say(f"Sorry, that failed: {type(exc).__name__}", f"fail-{new_session_id()}")

    async def _compress_if_full(self, agent: Agent) -> None:
        """Compress a session past `compress_at` of its window before the next message's
        turn starts (between turns), rather than in the middle of that turn."""
        try:
            fill = await agent.context_fill()
            if fill is None or fill <= self.ctx.compress_at or not await agent.acompress():
                return
        except Exception:
            log.warning("%s: compressing the session failed", self.chat.platform, exc_info=True)
            return
        if agent.session_id and agent.session_id != self.session_id:
            self.session_id = agent.session_id  # compression continues in a child session
            await self._save()

    async def _events(self, agent: Agent, text: Content | None) -> AsyncIterable[ev.Event]:
        if text is None:
            return TurnEvents(agent.arun_queued, agent.subscribe, agent.interrupt, ANSWERS)
        if isinstance(text, str):
            text = await run_blocking(with_skill, text, agent.skills)
        prompt = self.room.prompt or self.settings.prompt
        if prompt:  # the chat's own prompt replaces talaria's, notes included
            prompt = "\n\n".join([prompt, *self.prompt_notes])
        return agent.events(text, system_message=prompt, answers=ANSWERS)

    async def _on_event(self, event: ev.Event, view: TurnView, generation: int) -> None:
        if isinstance(event, ev.TurnStarted):
            self.finishing = False
            self.turn_started.set()
            self.typing.show()
            view.reset()
        elif isinstance(event, ev.TurnFinished):
            await self._turn_finished(event, view, generation)
        elif isinstance(event, ev.ApprovalRequested | ev.ClarifyRequested):
            await self._ask(event)
        elif isinstance(event, ev.RequestResolved | ev.RequestWithdrawn):
            await self._settled(event)
        elif isinstance(event, ev.QueuedMessageStarted):
            self.waiting.pop(event.message_id, None)
        elif isinstance(event, ev.SessionContinued):
            self.session_id = event.session_id
            await self._save()
        else:
            await view.on_event(event)

    async def _turn_finished(self, event: ev.TurnFinished, view: TurnView, generation: int) -> None:
        await self.typing.end()
        if generation != self.generation or event.exit_reason == "interrupted":
            await view.stopped()
            return
        await view.settle()
        answered = [m for m in self.taken if m not in self.waiting.values()]
        self.taken = [m for m in self.taken if m not in answered]
        text = event.final_response or f"(no answer: the turn ended with {event.exit_reason})"
        out = files.outgoing(text, self.folder)
        sendable = out.files if self.sends_files else []
        if out.files or out.refused:
            unsent = [f"{path.name} was not sent: {FILES_REFUSED}" for path in out.files]
            notes = [*out.refused, *([] if sendable else unsent)]
            shown = "\n".join([out.text, *notes]).strip()
            text = shown or "Sent: " + ", ".join(path.name for path in sendable)
        turn_id = f"{self.chat.platform}:{answered[-1] if answered else new_session_id()}"
        reply_to = answered[-1] if answered else None
        parts = view.answer(turn_id, text, reply_to)
        chat = self.chat
        sent_files = [
            OutboundPart(f"{turn_id}/file{n}", chat.platform, chat.chat_id, chat.thread_id,
                         path.name, reply_to, file=str(path))
            for n, path in enumerate(sendable)
        ]  # fmt: skip
        inbound = (self.chat.platform, answered[0]) if answered else None
        self.finishing = not self.waiting
        await self.ctx.outbox.post([*parts, *sent_files], inbound)
        for part in sent_files:
            await self._said_if_dropped(part)
        for message_id in answered[1:]:
            await run_blocking(self.ctx.store.ledger_finish_inbound, self.chat.platform, message_id)

    @property
    def sends_files(self) -> bool:
        return isinstance(self.ui.platform, SendsFiles)

    async def _said_if_dropped(self, part: OutboundPart) -> None:
        """A file the platform refused for good is said in the chat (the log has why)."""
        stored = await run_blocking(self.ctx.store.ledger_part, part.id)
        if stored is not None and stored.status == DROPPED:
            await self.say(f"Could not send {part.text}: the platform refused it.", part.id + "/no")

    # ---- questions ------------------------------------------------------------------------

    async def _ask(self, event: ev.ApprovalRequested | ev.ClarifyRequested) -> None:
        number = str(next(self._numbers))
        buttons_ok = self.ui.platform.capabilities.buttons
        if isinstance(event, ev.ApprovalRequested):
            asked = f"{asked_by(event)}run `{event.command}`?"
            text = f"Request {number}: {asked}\n{event.reason}".strip()
            choices: tuple[str, ...] = ()
            buttons = [Button(label, f"{number}:{value}") for label, value in APPROVAL_BUTTONS]
            hint = f"Reply /approve {number} (or /approve {number} session) or /deny {number}."
        else:
            choices = tuple(event.choices or ())
            text = f"Question {number}: {asked_by(event)}{event.question}"
            buttons = [Button(choice, f"{number}:{i}") for i, choice in enumerate(choices)]
            listed = "\n".join(f"{i + 1}. {choice}" for i, choice in enumerate(choices))
            hint = (listed + "\n" if listed else "") + "Reply with your answer."
        shown = text if buttons_ok and buttons else f"{text}\n{hint}"
        # open before it is shown: a press can arrive before `send` returns (Matrix shows the
        # question while the adapter is still adding its choices)
        pending = self.requests[number] = Pending(
            event.request_id, event.kind, shown, None, choices
        )
        pending.message_id = await self.ui.send(shown, buttons if buttons_ok else ())

    async def _settled(self, event: ev.RequestResolved | ev.RequestWithdrawn) -> None:
        number, pending = next(
            ((n, p) for n, p in self.requests.items() if p.request_id == event.request_id),
            (None, None),
        )
        if number is None or pending is None:
            return
        del self.requests[number]
        if isinstance(event, ev.RequestResolved):
            outcome = f"Answered: {event.answer}"
        else:
            outcome = f"Withdrawn ({event.reason.replace('_', ' ')})"
        if pending.message_id is not None and self.ui.can_edit:
            await self.ui.edit(pending.message_id, f"{pending.text}\n{outcome}", final=True)
        elif isinstance(event, ev.RequestWithdrawn):
            await self.ui.send(f"Request {number}: {outcome.lower()}")

    async def _pressed(self, press: ButtonPress) -> None:
        number, _, choice = press.value.partition(":")
        await self._answer(press.sender_id, number, choice)

    async def _answer(self, sender_id: str, number: str, choice: str) -> bool:
        """Answer request `number` for `sender_id`; False when it is not theirs to answer."""
        pending = self.requests.get(number)
        if pending is None or self.agent is None:
            return False
        paired = await run_blocking(self.ctx.store.ledger_is_paired, self.chat.platform, sender_id)
        if not access.may_answer(self.settings, sender_id, paired):
            return False
        answer: Any = choice
        if pending.kind == "clarify" and choice.isdigit() and int(choice) < len(pending.choices):
            answer = pending.choices[int(choice)]
        try:
            return self.agent.respond(pending.request_id, answer)
        except ValueError:
            return False

    async def _answers_clarify(self, message: Inbound, text: str) -> bool:
        """A plain reply while a question is open answers it (the newest one)."""
        open_questions = [n for n, p in self.requests.items() if p.kind == "clarify"]
        if not open_questions or text[:1] in COMMAND_MARKS:
            return False
        number = open_questions[-1]
        choices = self.requests[number].choices
        choice = str(int(text) - 1) if text.isdigit() and 0 < int(text) <= len(choices) else text
        return await self._answer(message.sender_id, number, choice)

    # ---- commands -------------------------------------------------------------------------

    async def _command(self, message: Inbound, text: str) -> bool:
        """Run a chat command; False when `text` is not one (it goes to the model)."""
        word, _, rest = text.partition(" ")
        name = word[1:].split("@", 1)[0].lower()
        handler = COMMANDS.get(name)
        if handler is None:
            return False
        reply = await handler(self, message, rest.strip())
        await self.say(reply, f"cmd:{self.chat.platform}:{message.message_id}", message.message_id)
        return True

    async def _new(self, message: Inbound, rest: str) -> str:
        await self._leave_session()
        self.session_id = new_session_id()
        await self._save()
        return "New conversation started."

    async def _leave_session(self) -> None:
        self.generation += 1
        if self.agent is not None and self.run is not None and not self.run.done():
            self.agent.interrupt(reason="a new conversation was started in the chat")
            await asyncio.wait([self.run])
        await self._drop_agent()

    async def _stop(self, message: Inbound, rest: str) -> str:
        if self.agent is None or self.run is None or self.run.done():
            return "Nothing is running."
        dropped = self.agent.clear_queue()
        self.waiting.clear()
        self.agent.interrupt(reason="stopped from the chat")
        return f"Stopped (and dropped {dropped} queued)." if dropped else "Stopped."

    async def _model(self, message: Inbound, rest: str) -> str:
        if not rest:
            return f"Model: {self.model or '(the configured default)'}"
        self.room = replace(self.room, model=rest)
        await self._save()
        self.stale_agent = True
        return f"Model for this chat: {rest}"

    async def _busy(self, message: Inbound, rest: str) -> str:
        if rest not in BUSY_MODES:
            return f"Busy mode: {self.busy_mode} (one of {', '.join(BUSY_MODES)})"
        self.room = replace(self.room, busy=rest)
        await self._save()
        return f"Busy mode for this chat: {rest}"

    async def _usage(self, message: Inbound, rest: str) -> str:
        info = await run_blocking(self.ctx.store.get_session, self.session_id or "")
        usage = info.usage if info is not None else {}
        tokens_in = sum(int(usage.get(k) or 0) for k in USAGE_BUCKETS if k != "output_tokens")
        tokens_out = int(usage.get("output_tokens") or 0)
        cost = usage.get("estimated_cost_usd")
        shown = f", about ${cost:.4f}" if isinstance(cost, int | float) else ""
        return (
            f"This conversation: {tokens_in} tokens in, {tokens_out} out{shown} "
            f"(session {self.session_id})."
        )

    async def _resume(self, message: Inbound, rest: str) -> str:
        if not rest:
            recent = await run_blocking(self.ctx.store.recent, 5)
            listed = "\n".join(f"{s.id}  {s.title or s.preview[:40]}" for s in recent)
            return f"Recent conversations:\n{listed}\nSend /resume <id> to continue one."
        try:
            session_id = await run_blocking(self.ctx.store.resolve, rest)
        except Exception as exc:
            return f"Cannot resume {rest!r}: {exc}"
        await self._leave_session()
        self.session_id = session_id
        await self._save()
        return f"Continuing conversation {session_id}."

    async def _approve(self, message: Inbound, rest: str) -> str:
        number, _, scope = rest.partition(" ")
        choice = "session" if scope.strip() == "session" else "once"
        done = await self._answer(message.sender_id, number, choice)
        return f"Request {number} approved." if done else f"Request {number} is not open to you."

    async def _deny(self, message: Inbound, rest: str) -> str:
        number = rest.split(" ", 1)[0]
        done = await self._answer(message.sender_id, number, "deny")
        return f"Request {number} denied." if done else f"Request {number} is not open to you."

    async def _help(self, message: Inbound, rest: str) -> str:
        return HELP

    async def close(self) -> None:
        if self.run is not None and not self.run.done() and self.agent is not None:
            self.agent.interrupt(reason="the gateway is stopping")
            # The interrupted turn saves what it completed before the agent closes; a busy
            # machine can take seconds for that (5 s lost a turn's messages under load).
            await asyncio.wait([self.run], timeout=STOP_GRACE)
        if self.worker is not None:
            self.worker.cancel()
        await self.ui.close()
        await self._drop_agent()


STOP_GRACE = 60.0
"""Seconds a stopping gateway waits for an interrupted turn to save and end."""


def _answered_elsewhere(event: ev.Event) -> None:
    """The lasting subscription only declares that the chat answers; each run's event stream
    is where the events are read."""


COMMANDS = {
    "new": ChatSession._new,
    "stop": ChatSession._stop,
    "model": ChatSession._model,
    "busy": ChatSession._busy,
    "usage": ChatSession._usage,
    "resume": ChatSession._resume,
    "approve": ChatSession._approve,
    "deny": ChatSession._deny,
    "help": ChatSession._help,
    "start": ChatSession._help,  # what Telegram sends when a user first opens the chat
}


def _text(content: list[dict[str, Any]]) -> str:
    """The text of a multimodal message (a busy chat's queue and steering take text)."""
    return "\n".join(str(part.get("text", "")) for part in content if part.get("type") == "text")
