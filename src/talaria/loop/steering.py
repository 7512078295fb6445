"""What a user says while the agent works: steers for the running turn, messages for the next.

A steer is a user note the loop adds after the current tool results and before its next model
call (never between a tool call and its result); several are joined in order. A steer that
comes after the turn's last model call, or when no turn runs, becomes a queued message. Queued
messages run as turns of their own, in order, when the running one ends; the agent keeps them
in the session's state in the store, so a crash of this process loses none of them.

The inbox is filled from any thread (a UI, a server's request handler) and drained by the
loop; it does no I/O itself.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from talaria.core import exit_reason
from talaria.events import (
    Event,
    MessageQueued,
    Notice,
    QueuedMessageStarted,
    SteerAccepted,
)

if TYPE_CHECKING:
    from talaria.store.base import SessionStore

log = logging.getLogger("talaria.steering")

QUEUE_STATE_KEY = "queued_messages"
"""The session-state key under which the store keeps the queued messages."""


class TurnMismatch(ValueError):
    """A steer or interrupt named a turn that is not the one running (it has ended)."""


@dataclass(frozen=True, slots=True)
class UserNote:
    """A steer or a queued message: the user's words and the id events refer to them by."""

    id: str
    text: str
    from_steer: bool = False

    def to_state(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "from_steer": self.from_steer}

    @classmethod
    def from_state(cls, raw: Any) -> UserNote | None:
        if not isinstance(raw, dict) or not isinstance(raw.get("text"), str):
            return None
        return cls(str(raw.get("id") or new_note_id()), raw["text"], bool(raw.get("from_steer")))


def new_note_id() -> str:
    return f"msg_{os.urandom(6).hex()}"


class SteeringInbox:
    """The steers for the running turn and the messages queued after it (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steers: list[UserNote] = []
        self._queue: list[UserNote] = []
        self._turn: str | None = None

    @property
    def running_turn(self) -> str | None:
        """The task id of the turn that takes steers now (None between turns)."""
        return self._turn

    def check_turn(self, turn_id: str | None) -> None:
        """Refuse a request meant for a turn other than the running one."""
        if turn_id is not None and turn_id != self._turn:
            raise TurnMismatch(
                f"turn {turn_id} is not running"
                + (f" (the running turn is {self._turn})" if self._turn else " (it has ended)")
            )

    def begin(self, turn_id: str) -> None:
        with self._lock:
            self._turn = turn_id

    def steer(
        self, text: str, turn_id: str | None = None, *, note_id: str | None = None
    ) -> tuple[UserNote, bool]:
        """Add a steer to the running turn: (note, True); with no turn running it is queued
        instead: (note, False). TurnMismatch when `turn_id` names another turn. `note_id`:
        an id chosen by the caller (a workflow's, the same on every replay)."""
        with self._lock:
            self.check_turn(turn_id)
            note = UserNote(note_id or new_note_id(), text, from_steer=True)
            if self._turn is None:
                self._queue.append(note)
                return note, False
            self._steers.append(note)
            return note, True

    def take_steers(self) -> list[UserNote]:
        """The steers that arrived since the last take, oldest first."""
        with self._lock:
            taken, self._steers = self._steers, []
        return taken

    def end(self) -> list[UserNote]:
        """The turn is over: steers it did not deliver become queued messages (returned)."""
        with self._lock:
            self._turn = None
            late, self._steers = self._steers, []
            self._queue.extend(late)
        return late

    def queue(
        self, text: str, *, first: bool = False, note_id: str | None = None
    ) -> tuple[UserNote, int]:
        """Queue a message for the next turn; (note, its position from 1). `note_id` as for
        `steer`."""
        note = UserNote(note_id or new_note_id(), text)
        with self._lock:
            if first:
                self._queue.insert(0, note)
                return note, 1
            self._queue.append(note)
            return note, len(self._queue)

    def adopt(self, notes: Iterable[UserNote]) -> None:
        """Queue messages a store kept from an earlier process, ahead of this one's, once each."""
        with self._lock:
            known = {note.id for note in self._queue}
            self._queue[0:0] = [note for note in notes if note.id not in known]

    def take_next(self) -> UserNote | None:
        with self._lock:
            return self._queue.pop(0) if self._queue else None

    def clear(self) -> list[UserNote]:
        """Take back every waiting message (returned, in order)."""
        with self._lock:
            taken, self._queue = self._queue, []
        return taken

    def remove(self, note_id: str) -> UserNote | None:
        """Take back one waiting message (None when it is no longer waiting)."""
        with self._lock:
            for index, note in enumerate(self._queue):
                if note.id == note_id:
                    return self._queue.pop(index)
        return None

    def replace(self, note_id: str, text: str) -> bool:
        """Change a waiting message's words in place (False when it is no longer waiting)."""
        with self._lock:
            for index, note in enumerate(self._queue):
                if note.id == note_id:
                    self._queue[index] = UserNote(note.id, text, note.from_steer)
                    return True
        return False

    def queued(self) -> list[UserNote]:
        """The waiting messages, in the order they will run."""
        with self._lock:
            return list(self._queue)


def joined(notes: list[UserNote]) -> str:
    """Several steers as one user message, in the order they came."""
    return "\n\n".join(note.text for note in notes)


class Steering:
    """The agent's side of steering: the inbox, the events that acknowledge each request,
    and the copy of the queue the store keeps with the session."""

    def __init__(self, emit: Callable[[Event], None]) -> None:
        self.inbox = SteeringInbox()
        self._emit = emit
        self._kept_in: tuple[SessionStore, str] | None = None
        self._run_after_interrupt = False

    def attach(self, store: SessionStore | None, session_id: str) -> None:
        """The session the queue belongs to: messages its store kept (queued by a process
        that ended before running them) join the queue, once. The queue moves with the
        agent: messages queued before a session was known are saved with this one, and a
        session the agent leaves (another one resumed, compression continued in a new one)
        keeps none of them, so each runs once."""
        where = (store, session_id) if store is not None else None
        if where == self._kept_in:
            return
        left, self._kept_in = self._kept_in, where
        if left is not None:
            self._write(left, [])
        kept = self._read(where) if where is not None else []
        if kept:
            self.inbox.adopt(kept)
        if [note.id for note in self.inbox.queued()] != [note.id for note in kept]:
            self._save()

    def _read(self, where: tuple[SessionStore, str]) -> list[UserNote]:
        store, session_id = where
        try:
            raw = store.get_state(session_id, QUEUE_STATE_KEY)
        except Exception as exc:  # a store that cannot say keeps nothing from before
            log.warning("queued messages of %s not read: %s", session_id, exc)
            return []
        return [note for note in map(UserNote.from_state, raw or []) if note is not None]

    def steer(self, text: str, turn_id: str | None, *, note_id: str | None = None) -> str:
        note, accepted = self.inbox.steer(text, turn_id, note_id=note_id)
        if accepted:
            self._emit(SteerAccepted(note.id, text, self.inbox.running_turn or ""))
        else:
            self._queued(note, self._position(note))
        return note.id

    def queue(self, text: str, *, first: bool = False, note_id: str | None = None) -> str:
        note, position = self.inbox.queue(text, first=first, note_id=note_id)
        self._queued(note, position)
        return note.id

    def clear(self) -> int:
        """Take back every waiting message; how many there were."""
        taken = self.inbox.clear()
        if taken:
            self._save()
        return len(taken)

    def remove(self, note_id: str) -> bool:
        """Take back one waiting message; False when it already ran (or never was)."""
        if self.inbox.remove(note_id) is None:
            return False
        self._save()
        return True

    def edit(self, note_id: str, text: str) -> bool:
        """New words for a waiting message, in its place; False when it already ran."""
        if not self.inbox.replace(note_id, text):
            return False
        self._save()
        return True

    def interrupting(self, text: str, turn_id: str | None) -> None:
        """`interrupt(message)`: the message runs first once the turn has stopped."""
        self.inbox.check_turn(turn_id)
        self.queue(text, first=True)
        self._run_after_interrupt = True

    def begin_turn(self, task_id: str) -> None:
        self.inbox.begin(task_id)

    def end_turn(self) -> None:
        """Steers the turn did not deliver become queued messages, and say so."""
        late = self.inbox.end()
        for note in late:
            self._emit(
                Notice(
                    "info",
                    "a steer came after the turn's last model call: it runs as the next message",
                )
            )
            self._queued(note, self._position(note))

    def next_message(self, turn_exit_reason: str) -> UserNote | None:
        """The queued message to run now that a turn ended with `turn_exit_reason`: none after a
        failure, nor after an interrupt that brought no message of its own (the user said
        stop: the queue waits for the next run)."""
        resume, self._run_after_interrupt = self._run_after_interrupt, False
        ended = exit_reason(turn_exit_reason)
        if ended == "failed" or (ended == "interrupted" and not resume):
            return None
        return self.take_queued()

    def take_queued(self) -> UserNote | None:
        """The first queued message, taken off the queue (and the store's copy)."""
        note = self.inbox.take_next()
        if note is not None:
            self._save()
        return note

    def started(self, note: UserNote, task_id: str) -> None:
        self._emit(QueuedMessageStarted(note.id, note.text, task_id))

    def _queued(self, note: UserNote, position: int) -> None:
        self._save()
        self._emit(MessageQueued(note.id, note.text, position, note.from_steer))

    def _position(self, note: UserNote) -> int:
        queued = self.inbox.queued()
        return next((i for i, n in enumerate(queued, 1) if n.id == note.id), len(queued))

    def _save(self) -> None:
        if self._kept_in is not None:
            self._write(self._kept_in, self.inbox.queued())

    def _write(self, where: tuple[SessionStore, str], notes: list[UserNote]) -> None:
        store, session_id = where
        try:
            store.set_state(session_id, QUEUE_STATE_KEY, [n.to_state() for n in notes])
        except Exception as exc:  # the queue still runs from memory; say it is not kept
            log.warning("queued messages of %s not saved: %s", session_id, exc)
            self._emit(Notice("warning", f"the queued messages are not saved: {exc}"))
