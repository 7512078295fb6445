"""The live history of one session and its write-through to the store.

Invariant 3 ("nothing is lost"): `append` commits each message to the store before returning,
so the loop never makes a model call with an unsaved message behind it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from talaria.store.base import SessionStore

Message = dict[str, Any]


def new_session_id() -> str:
    """Sortable by creation time, unique without coordination."""
    return f"{datetime.now().strftime('%Y%m%d_%H%M%S')}_{uuid.uuid4().hex[:6]}"


@dataclass
class SessionHandle:
    id: str
    store: SessionStore | None
    system_prompt: str | None = None
    history: list[Message] = field(default_factory=list)
    """The conversation without the system prompt, in canonical form: what the model sees."""
    next_seq: int = 0
    """The store sequence number the next saved message gets."""
    unsaved: int = 0
    """How many trailing messages of `history` the store does not hold yet."""

    def append(self, *messages: Message) -> None:
        self.history.extend(messages)
        self.unsaved += len(messages)
        self.flush()

    def flush(self) -> None:
        if self.store is None or self.unsaved == 0:
            self.unsaved = 0
            return
        pending = self.history[len(self.history) - self.unsaved :]
        self.store.append_messages(self.id, list(enumerate(pending, start=self.next_seq)))
        self.next_seq += len(pending)
        self.unsaved = 0

    def use_history(self, history: list[Message]) -> None:
        """Adopt a caller-supplied history. A session with nothing stored yet saves it, so that
        resuming later shows the whole conversation; otherwise only new messages are saved."""
        self.history = list(history)
        self.unsaved = len(self.history) if self.next_seq == 0 else 0
        self.flush()
