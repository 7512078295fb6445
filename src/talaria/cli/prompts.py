"""Approval and clarify prompts: the engine's interaction requests, answered at the prompt the
main thread owns.

The broker listens to the agent's request events: each request is shown the moment it is asked
(so parallel approvals are all visible), the prompt asks for the oldest one, and the next valid
line the user enters answers it through `agent.respond`. A request the engine withdraws (timed
out, interrupted, answered elsewhere) leaves the queue with a note, so a later line never
answers a call that is already dead. Ctrl+C or leaving the chat denies what is pending.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from talaria import events as ev
from talaria.interaction import asked_by

if TYPE_CHECKING:
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

APPROVAL_ANSWERS: dict[str, str] = {
    "o": "once",
    "once": "once",
    "y": "once",
    "yes": "once",
    "1": "once",
    "s": "session",
    "session": "session",
    "2": "session",
    "a": "always",
    "always": "always",
    "3": "always",
    "d": "deny",
    "deny": "deny",
    "n": "deny",
    "no": "deny",
    "4": "deny",
}
APPROVAL_LABEL = "allow? [o]nce [s]ession [a]lways [d]eny (one key) › "
SINGLE_KEYS = tuple(key for key in APPROVAL_ANSWERS if len(key) == 1)
"""Keys that answer an approval at once, without Enter (o s a d, y n, 1-4)."""
CLARIFY_LABEL = "answer › "


def parse_approval(answer: str) -> str | None:
    """once | session | always | deny, or None when the answer is not one of them."""
    return APPROVAL_ANSWERS.get(answer.strip().lower())


def parse_clarify(answer: str, choices: list[str] | None) -> str | None:
    """A choice's number picks that choice; any other non-empty text is a free answer."""
    text = answer.strip()
    if not text:
        return None
    if choices and text.isdigit() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1]
    return text


def approval_text(request: Any) -> str:
    """What the user reads before deciding (who asks, command, why it needs a yes, the
    choices)."""
    lines = [f"⚠ {asked_by(request)}{request.tool_name} needs your approval: {request.reason}"]
    lines.extend(f"    {line}" for line in str(request.command).splitlines() or [""])
    lines.append("  o: just this once · s: this session · a: always (config.yaml) · d: deny")
    return "\n".join(lines)


def clarify_text(question: str, choices: list[str] | None) -> str:
    lines = [f"? {question}"]
    if choices:
        lines.extend(f"    {number}. {choice}" for number, choice in enumerate(choices, 1))
        lines.append("  type a number, or your own answer")
    return "\n".join(lines)


@dataclass
class Question:
    """One request waiting for the user's line."""

    request_id: str
    label: str
    parse: Callable[[str], str | None]
    on_cancel: str
    single_key: bool = False
    """A single key press answers it (approvals); otherwise a line does (clarify)."""


class QuestionBroker:
    """Queues the agent's requests for the prompt, oldest first."""

    def __init__(
        self,
        show: Callable[[str, str], None],
        wake: Callable[[], None],
        respond: Callable[[str, str], bool],
    ) -> None:
        self._show = show
        """Prints a question's text (text, style) above the prompt."""
        self._wake = wake
        """Redraws the prompt so it shows the current question's label."""
        self._respond = respond
        """Hands an answer to the agent (`agent.respond`)."""
        self._lock = threading.Lock()
        self._queue: list[Question] = []
        self._closed = False

    def on_event(self, event: Any) -> None:
        """The agent's event listener (called on the agent's thread)."""
        if isinstance(event, ev.ApprovalRequested):
            question = Question(
                event.request_id, APPROVAL_LABEL, parse_approval, "deny", single_key=True
            )
            self._enqueue(question, approval_text(event), "yellow")
        elif isinstance(event, ev.ClarifyRequested):
            choices = event.choices

            def parse(line: str) -> str | None:
                return parse_clarify(line, choices)

            question = Question(event.request_id, CLARIFY_LABEL, parse, "")
            text = clarify_text(asked_by(event) + event.question, choices)
            self._enqueue(question, text, "cyan")
        elif isinstance(event, ev.RequestWithdrawn | ev.RequestResolved):
            self._drop(event)

    def pending(self) -> Question | None:
        with self._lock:
            return self._queue[0] if self._queue else None

    def answer(self, line: str) -> str | None:
        """Give the oldest request the user's line: the answer it took (a choice's number
        becomes the choice), or None when the line is not a valid answer."""
        with self._lock:
            question = self._queue[0] if self._queue else None
            value = question.parse(line) if question is not None else None
            if question is None or value is None:
                return None
            self._queue.pop(0)
        self._respond(question.request_id, value)
        self._wake()
        return value

    def takes_single_key(self) -> bool:
        question = self.pending()
        return question is not None and question.single_key

    def cancel(self) -> None:
        """Deny (or leave unanswered) everything pending."""
        with self._lock:
            queue, self._queue = self._queue, []
        for question in queue:
            self._respond(question.request_id, question.on_cancel)
        self._wake()

    def close(self) -> None:
        """No more questions will be answered: everything pending or later is cancelled."""
        with self._lock:
            self._closed = True
        self.cancel()

    def _enqueue(self, question: Question, text: str, style: str) -> None:
        with self._lock:
            closed = self._closed
            if not closed:
                self._queue.append(question)
                waiting = len(self._queue)
        if closed:
            self._respond(question.request_id, question.on_cancel)
            return
        self._show(
            text + (f"\n  ({waiting} questions waiting; oldest first)" if waiting > 1 else ""),
            style,
        )
        self._wake()

    def _drop(self, event: ev.RequestWithdrawn | ev.RequestResolved) -> None:
        with self._lock:
            before = len(self._queue)
            self._queue = [q for q in self._queue if q.request_id != event.request_id]
            dropped = len(self._queue) < before
        if dropped and isinstance(event, ev.RequestWithdrawn):
            what = "approval request" if event.kind == "approval" else "question"
            why = WITHDRAWN_REASONS.get(event.reason, event.reason)
            self._show(f"  ✗ the {what} was withdrawn ({why})", "dim")
        if dropped:
            self._wake()


WITHDRAWN_REASONS = {
    "timeout": "nobody answered in time; it was denied",
    "interrupted": "the turn was interrupted",
    "turn_ended": "the turn ended",
}


def bind_single_keys(
    bindings: KeyBindings, broker: QuestionBroker, answered: Callable[[str], None]
) -> None:
    """An approval is answered by one key press (o, s, a, d, ...), no Enter needed; a key
    typed into a non-empty line, or while no approval waits, is just text."""
    from prompt_toolkit.application import get_app
    from prompt_toolkit.filters import Condition

    @Condition
    def answering() -> bool:
        return broker.takes_single_key() and not get_app().current_buffer.text

    def answer(event: KeyPressEvent) -> None:
        chosen = broker.answer(event.data)
        if chosen is not None:
            answered(chosen)

    for key in SINGLE_KEYS:
        bindings.add(key, filter=answering)(answer)
