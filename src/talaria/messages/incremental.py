"""The valid-history invariant (docs/architecture.md) at a cost flat in history length: repair once,
then check only what is appended.

The loop sends the whole history on every request, and the history grows by a step each time.
A history that comes from outside (a resumed session, `conversation_history`, another writer's
messages, a compressed or cut history: any list this object has not seen grow) is repaired
whole, exactly as `repair_history` does. After that, each request checks only the messages
appended since the previous one, against the state the last scan ended in: a tail that keeps
every rule joins the already-valid copy as it is. Anything else (a tail that breaks a rule, a
new system prompt) falls back to the whole repair, so the result is always provider-valid.
A repaired history stays as it was repaired: later requests extend that copy (a stable prefix
for the prompt cache), where a whole repair of the longer history could differ in a detail
(an empty last user message kept as "(empty message)" would be dropped once another follows).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from talaria.core import Message
from talaria.messages.repair import repair_history
from talaria.messages.validate import HistoryScan, scan_history


@dataclass
class IncrementalRepair:
    """The repaired API copy of one live history, kept up to date as the history grows."""

    checks: int = 0
    """Messages checked so far, in all: grows with what is appended, not with each request."""
    _source: list[Message] | None = field(default=None, repr=False)
    _seen: int = 0
    _last: Message | None = field(default=None, repr=False)
    _system: str | None = None
    _output: list[Message] = field(default_factory=list, repr=False)
    _scan: HistoryScan | None = field(default=None, repr=False)

    def messages(self, system_prompt: str | None, history: list[Message]) -> list[Message]:
        """The provider-valid copy of the system prompt and `history` (never mutated)."""
        if not (self._grew(system_prompt, history) and self._take_tail(history)):
            self._rebuild(system_prompt, history)
        return list(self._output)

    def _grew(self, system_prompt: str | None, history: list[Message]) -> bool:
        """True when `history` is the list last seen, with only messages added at its end."""
        return (
            history is self._source
            and self._scan is not None
            and 0 < self._seen <= len(history)
            and history[self._seen - 1] is self._last
            and system_prompt == self._system
        )

    def _take_tail(self, history: list[Message]) -> bool:
        scan = self._scan
        assert scan is not None
        tail = history[self._seen :]
        for position, message in enumerate(tail, start=len(self._output)):
            scan.check(position, message)
        self.checks += len(tail)
        if scan.problems or scan.pending or any(_empty_result(m) for m in tail):
            return False
        self._output.extend(tail)
        self._remember(history)
        return True

    def _rebuild(self, system_prompt: str | None, history: list[Message]) -> None:
        head: list[Message] = (
            [{"role": "system", "content": system_prompt}] if system_prompt else []
        )
        whole = head + history
        scan = scan_history(whole)
        self.checks += len(whole)
        if scan.problems or scan.pending or any(_empty_result(m) for m in whole):
            whole = repair_history(whole).messages
            scan = scan_history(whole)
            self.checks += len(whole)
        self._output, self._scan, self._system = whole, scan, system_prompt
        self._remember(history)

    def _remember(self, history: list[Message]) -> None:
        self._source, self._seen = history, len(history)
        self._last = history[-1] if history else None


def _empty_result(message: object) -> bool:
    """`repair_history` rewrites empty tool results (providers would take them as they are)."""
    return (
        isinstance(message, dict) and message.get("role") == "tool" and message.get("content") == ""
    )
