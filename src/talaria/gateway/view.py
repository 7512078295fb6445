"""What a chat shows of a running turn: a typing indicator, one progress message edited as
tools run (a plain follow-up per tool where the platform cannot edit), the answer streamed
by throttled edits, and at the end the answer's parts (the first one replacing the streamed
preview)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from talaria import events as ev
from talaria.gateway import render
from talaria.gateway.platform import Button, ChatRef, Platform, RateLimited, Sleep, end_tasks
from talaria.store.ledger import OutboundPart

log = logging.getLogger("talaria.gateway")

CURSOR = " ▌"
STOPPED = "(stopped)"
UI_ATTEMPTS = 3
SHOWN_KEPT = 64


@dataclass
class ChatUI:
    """Live messages in one chat (progress, previews, questions): sent at once and edited
    in place; unlike answers they are not kept in the ledger, since they only matter while
    the turn runs."""

    platform: Platform
    chat: ChatRef
    stream: bool = True
    edit_interval: float = 1.0
    clock: Callable[[], float] = time.monotonic
    shown: dict[str, tuple[str, tuple[Button, ...]]] = field(default_factory=dict)
    """What each live message shows now (an edit to the same is not sent)."""
    held_until: float = float("-inf")
    """Until then (by `clock`) no edit is sent: the platform asked to wait this long."""
    sleep: Sleep = asyncio.sleep
    owed: dict[str, tuple[str, tuple[Button, ...]]] = field(default_factory=dict)
    """Final edits (a settled progress message, an answered question) the hold put off:
    no later edit would overtake them, so they are made once it ends."""
    catching_up: asyncio.Task[None] | None = None

    @property
    def can_edit(self) -> bool:
        return self.platform.capabilities.can_edit

    async def send(self, text: str, buttons: Sequence[Button] = ()) -> str | None:
        for _ in range(UI_ATTEMPTS):
            try:
                key = f"ui-{uuid.uuid4().hex}"
                sent = await self.platform.send(self.chat, text, key=key, buttons=buttons)
                self._remember(sent, text, buttons)
                return sent
            except RateLimited as refused:
                self._hold(refused)
                await asyncio.sleep(min(refused.retry_after, 30.0))
            except Exception as exc:
                log.warning("%s: could not show %r: %s", self.chat.platform, text[:40], exc)
                return None
        return None

    async def edit(
        self, message_id: str, text: str, buttons: Sequence[Button] = (), *, final: bool = False
    ) -> None:
        """Show `text` in a live message; skipped (the next edit overtakes it) while the
        platform's flood wait runs, since an edit sent then only prolongs it. A `final` edit,
        which nothing would overtake, is made once the wait is over."""
        if self.shown.get(message_id) == (text, tuple(buttons)):
            return
        if self.clock() < self.held_until:
            if final:
                self._owe(message_id, text, buttons)
            return
        try:
            await self.platform.edit(self.chat, message_id, text, buttons=buttons)
            self._remember(message_id, text, buttons)
        except RateLimited as refused:
            self._hold(refused)
            log.info("%s: edits held for %g s", self.chat.platform, refused.retry_after)
            if final:
                self._owe(message_id, text, buttons)
        except Exception as exc:  # a missed preview edit is overtaken by the next one
            log.info("%s: edit of %s skipped: %s", self.chat.platform, message_id, exc)

    def _owe(self, message_id: str, text: str, buttons: Sequence[Button]) -> None:
        self.owed[message_id] = (text, tuple(buttons))
        if self.catching_up is None or self.catching_up.done():
            self.catching_up = asyncio.create_task(self._catch_up())

    async def _catch_up(self) -> None:
        """The owed edits, once the hold is over (and again after any later hold)."""
        while self.owed:
            wait = self.held_until - self.clock()
            if wait > 0:
                await self.sleep(wait)
                continue
            message_id = next(iter(self.owed))
            text, buttons = self.owed.pop(message_id)
            await self.edit(message_id, text, buttons, final=True)

    async def close(self) -> None:
        """Give up the owed edits (the gateway is stopping)."""
        await end_tasks(self.catching_up)

    def _hold(self, refused: RateLimited) -> None:
        self.held_until = max(self.held_until, self.clock() + refused.retry_after)

    def _remember(self, message_id: str, text: str, buttons: Sequence[Button]) -> None:
        self.shown.pop(message_id, None)
        self.shown[message_id] = (text, tuple(buttons))
        while len(self.shown) > SHOWN_KEPT:  # only recent messages are edited
            del self.shown[next(iter(self.shown))]

    async def typing(self, *, active: bool = True) -> None:
        try:
            await self.platform.typing(self.chat, active=active)
        except Exception as exc:
            log.info("%s: typing indicator failed: %s", self.chat.platform, exc)


class Typing:
    """A chat's typing indicator: shown (renewed every `every` seconds) from `show` until
    `end`, which turns it off, as a person stops typing and sends: a platform's indicator
    may otherwise outlast the answer by its whole timeout (Matrix's)."""

    def __init__(self, ui: ChatUI, every: float) -> None:
        self.ui, self.every = ui, every
        self._task: asyncio.Task[None] | None = None
        self._ended = asyncio.Event()

    def show(self) -> None:
        if self._task is None and self.ui.platform.capabilities.typing:
            self._ended = asyncio.Event()  # its own: a previous one may still be ending
            self._task = asyncio.create_task(self._keep(self._ended))

    async def end(self) -> None:
        """Turn the indicator off and wait (a while) until the platform has it: the answer
        sent next then arrives after it."""
        task, self._task = self._task, None
        if task is not None:
            self._ended.set()
            await asyncio.wait([task], timeout=self.every)

    async def _keep(self, ended: asyncio.Event) -> None:
        # never cancelled mid-request: a late renewal cannot arrive after the notice ending it
        while not ended.is_set():
            await self.ui.typing()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ended.wait(), self.every)
        await self.ui.typing(active=False)


@dataclass
class TurnView:
    ui: ChatUI
    progress_id: str | None = None
    lines: list[str] = field(default_factory=list)
    started: dict[str, int] = field(default_factory=dict)
    """Tool call id -> its line in `lines`."""
    stream_id: str | None = None
    text: str = ""
    last_edit: float = float("-inf")

    def reset(self) -> None:
        """A new turn (a queued message's) gets messages of its own."""
        self.progress_id, self.stream_id, self.text = None, None, ""
        self.lines, self.started = [], {}

    async def on_event(self, event: ev.Event) -> None:
        if isinstance(event, ev.TextDelta):
            await self._streamed(event.text)
        elif isinstance(event, ev.ToolStarted):
            await self._tool_started(event)
        elif isinstance(event, ev.ToolFinished):
            await self._tool_finished(event)

    def _due(self, force: bool) -> bool:
        now = self.ui.clock()
        if force or now - self.last_edit >= self.ui.edit_interval:
            self.last_edit = now
            return True
        return False

    async def _streamed(self, delta: str) -> None:
        self.text += delta
        if not (self.ui.stream and self.ui.can_edit) or not self.text.strip():
            return
        preview = self._preview()
        if self.stream_id is None:
            self.stream_id = await self.ui.send(preview)
            self.last_edit = self.ui.clock()
        elif self._due(False):
            await self.ui.edit(self.stream_id, preview)

    def _preview(self) -> str:
        limit = self.ui.platform.capabilities.max_len - len(CURSOR)
        return self.text[:limit] + CURSOR

    async def _tool_started(self, event: ev.ToolStarted) -> None:
        if self.stream_id is not None:  # what the model said before the call: progress now
            self.progress_id, self.stream_id = self.stream_id, None
            self.lines.insert(0, self.text.strip())
        self.text = ""
        self.started[event.call_id] = len(self.lines)
        self.lines.append("… " + render.tool_started(event.name, event.arguments))
        if self.ui.can_edit:
            await self._show_progress(force=self.progress_id is None)

    async def _tool_finished(self, event: ev.ToolFinished) -> None:
        index = self.started.get(event.call_id)
        if index is None:
            return
        line = self.lines[index].removeprefix("… ")
        self.lines[index] = render.tool_finished(line, event.result, event.is_error)
        if self.ui.can_edit:
            await self._show_progress(force=False)
        else:
            await self.ui.send(self.lines[index])

    async def _show_progress(self, force: bool) -> None:
        text = self._progress_text()
        if self.progress_id is None:
            self.progress_id = await self.ui.send(text)
            self.last_edit = self.ui.clock()
        elif self._due(force):
            await self.ui.edit(self.progress_id, text)

    def _progress_text(self) -> str:
        text = "\n".join(line for line in self.lines if line)
        limit = self.ui.platform.capabilities.max_len
        return text if len(text) <= limit else "…" + text[-(limit - 1) :]

    async def settle(self) -> None:
        """The turn ended: the progress message shows every tool's outcome."""
        if self.progress_id is not None and self.ui.can_edit:
            await self.ui.edit(self.progress_id, self._progress_text(), final=True)

    async def stopped(self) -> None:
        """The turn was interrupted or superseded: its preview says so, and no answer comes."""
        if self.stream_id is not None:
            await self.ui.edit(
                self.stream_id, f"{self.text.strip()}\n{STOPPED}".strip(), final=True
            )
        await self.settle()
        self.reset()

    def answer(self, turn_id: str, text: str, reply_to: str | None) -> list[OutboundPart]:
        """The answer's parts; the first replaces the streamed preview where there is one."""
        chat = self.ui.chat
        pieces = render.split_message(text, self.ui.platform.capabilities.max_len)
        parts = [
            OutboundPart(f"{turn_id}/{n}", chat.platform, chat.chat_id, chat.thread_id, piece,
                         reply_to=reply_to, edit_of=self.stream_id if n == 0 else None)
            for n, piece in enumerate(pieces)
        ]  # fmt: skip
        self.reset()
        return parts
