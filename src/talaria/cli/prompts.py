"""Approval and clarify prompts: questions a tool asks from a worker thread, answered at the
prompt the main thread owns.

The agent calls `approval_callback` / `clarify_callback` from its tool threads and waits; the
`QuestionBroker` parks the question, the prompt shows it instead of the normal input line, and
the next line the user enters is the answer. Ctrl+C or leaving the chat cancels it, and a
cancelled approval is a denial (fail closed).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
APPROVAL_LABEL = "allow? [o]nce [s]ession [a]lways [d]eny › "
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
    """What the user reads before deciding (command, why it needs a yes, the choices)."""
    lines = [f"⚠ {request.tool_name} needs your approval: {request.reason}"]
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
    """One question waiting for the user's line."""

    label: str
    parse: Callable[[str], str | None]
    on_cancel: str
    answer: str | None = None
    done: threading.Event = field(default_factory=threading.Event)


class QuestionBroker:
    """Hands questions from tool threads to the prompt, one at a time."""

    def __init__(self, show: Callable[[str, str], None], wake: Callable[[], None]) -> None:
        self._show = show
        """Prints the question's text (text, style) above the prompt."""
        self._wake = wake
        """Redraws the prompt so it shows the question's label."""
        self._one_at_a_time = threading.Lock()
        self._lock = threading.Lock()
        self._pending: Question | None = None
        self._closed = False

    def pending(self) -> Question | None:
        with self._lock:
            return self._pending

    def ask(self, question: Question, text: str, style: str) -> str:
        """Show `text`, wait for a valid answer (blocking the calling tool thread)."""
        with self._one_at_a_time:
            with self._lock:
                if self._closed:
                    return question.on_cancel
                self._pending = question
            self._show(text, style)
            self._wake()
            question.done.wait()
            with self._lock:
                self._pending = None
            self._wake()
            return question.answer if question.answer is not None else question.on_cancel

    def answer(self, line: str) -> str | None:
        """Give the pending question the user's line: the answer it took (a choice's number
        becomes the choice), or None when the line is not a valid answer."""
        question = self.pending()
        if question is None:
            return None
        value = question.parse(line)
        if value is None:
            return None
        question.answer = value
        question.done.set()
        return value

    def cancel(self) -> None:
        question = self.pending()
        if question is not None:
            question.done.set()

    def close(self) -> None:
        """No more questions will be answered: everything pending or later is cancelled."""
        with self._lock:
            self._closed = True
        self.cancel()

    # ---- the agent's callbacks ----------------------------------------------------------

    def approve(self, request: Any) -> str:
        question = Question(APPROVAL_LABEL, parse_approval, on_cancel="deny")
        return self.ask(question, approval_text(request), "yellow")

    def clarify(self, question: str, choices: list[str] | None) -> str:
        asked = Question(
            CLARIFY_LABEL,
            lambda line: parse_clarify(line, choices),
            on_cancel="(the user did not answer)",
        )
        return self.ask(asked, clarify_text(question, choices), "cyan")
