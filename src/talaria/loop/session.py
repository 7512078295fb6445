"""The live history of one session and its write-through to the store.

Nothing lost (docs/architecture.md): `append` commits the unsaved messages to the store, in one
transaction, before returning, so the loop never makes a model call with an unsaved message
behind it. A step is one commit: the assistant message is `stage`d while its tool calls run and
saved with their results, so a killed process loses at most the step in flight and never leaves
calls without results in the store. Writes run off the event loop, except a small commit that a
store can make without waiting (`try_append_messages`: SQLite when nobody else is writing).
One writer at a time: a turn holds the session's lease in the store, picks up what another
writer committed since its last turn, and a second writer gets `SessionBusy`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from talaria.core import Message
from talaria.messages.incremental import IncrementalRepair
from talaria.messages.text import clean_value
from talaria.offload import run_blocking

if TYPE_CHECKING:
    from talaria.store.base import SessionStore


def new_session_id() -> str:
    """Sortable by creation time, unique without coordination."""
    return f"{time.strftime('%Y%m%d_%H%M%S')}_{os.urandom(3).hex()}"


@dataclass
class SessionHandle:
    """The session a turn works on: its history, and how much of it the store holds."""

    id: str
    store: SessionStore | None
    system_prompt: str | None = None
    history: list[Message] = field(default_factory=list)
    """The conversation without the system prompt, in canonical form: what the model sees."""
    next_seq: int = 0
    """The store sequence number the next saved message gets."""
    unsaved: int = 0
    """How many trailing messages of `history` the store does not hold yet."""
    writer: str | None = None
    """This handle's lease owner id while a turn runs (None between turns)."""
    repair: IncrementalRepair = field(default_factory=IncrementalRepair, repr=False)
    """The provider-valid copy of `history`, checked once per appended message."""
    cwd_note: str | None = None
    """Where the agent works now, when that is not the directory the stored system prompt
    names (a session resumed elsewhere; the prompt stays byte-stable): each request carries
    it in its newest message."""

    skills_in_use: str | None = None
    """Skills named for this run that the stored prompt lacks (a resumed session): each
    request carries them in its newest message."""
    skills_note: str | None = None
    """The skills that changed since the stored system prompt listed them (looked at each
    turn): each request carries it in its newest message."""

    async def append(self, *messages: Message) -> None:
        self.stage(*messages)
        await self.flush()

    def stage(self, *messages: Message) -> None:
        """Add to the history without saving yet: the next `append` (or `flush`) saves them
        together with its own messages."""
        self.history.extend(clean_value(message) for message in messages)
        self.unsaved += len(messages)

    async def flush(self) -> None:
        if self.store is None or self.unsaved == 0:
            self.unsaved = 0
            return
        pending = self.history[len(self.history) - self.unsaved :]
        items = list(enumerate(pending, start=self.next_seq))
        now = getattr(self.store, "try_append_messages", None)  # see SessionStore
        if now is None or not now(self.id, items, writer=self.writer):
            await run_blocking(self.store.append_messages, self.id, items, writer=self.writer)
        self.next_seq += len(pending)
        self.unsaved = 0

    async def begin_turn(self, owner: str) -> None:
        """Take the session's lease (SessionBusy if another live writer holds it) and adopt
        what other writers committed since this handle last wrote."""
        if self.store is None:
            return
        store = self.store
        await run_blocking(store.claim_writer, self.id, owner)
        self.writer = owner
        stored = await run_blocking(store.message_count, self.id)
        if stored > self.next_seq:
            theirs = await run_blocking(store.load_messages, self.id)
            mine = self.history[len(self.history) - self.unsaved :] if self.unsaved else []
            self.history = [*theirs, *mine]
            self.next_seq = len(theirs)

    async def end_turn(self) -> None:
        owner, self.writer = self.writer, None
        if self.store is not None and owner is not None:
            await run_blocking(self.store.release_writer, self.id, owner)

    async def use_history(self, history: Sequence[Mapping[str, Any]]) -> None:
        """Adopt a caller-supplied history. A session with nothing stored yet saves it, so that
        resuming later shows the whole conversation; otherwise only new messages are saved."""
        self.history = [clean_value(message) for message in history]
        self.unsaved = len(self.history) if self.next_seq == 0 else 0
        await self.flush()
