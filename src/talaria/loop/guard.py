"""The loop guard: a model that repeats the same tool calls is stopped before it burns the budget.

Per turn, every tool call the model makes (failed and invalid ones too) is reduced to a
signature: its name and its canonical arguments. When the newest calls form a cycle (A,A,A or
A,B,A,B or A,B,C,A,B,C) whose earlier runs also gave the same results, the guard escalates one
step each time the cycle goes on: first the model is warned (an ephemeral note on the next
request), then the repeated call is refused (an error result, not run), then the turn ends
with a reason the user can read. A repeated call whose result changes (polling a build that is
still printing) is progress, not a loop.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from talaria import fastjson
from talaria.core import ToolCall

MAX_PERIOD = 3
"""Longest cycle looked for; longer ones are left to the iteration budget."""

WARN, REFUSE, STOP = 1, 2, 3


def signature(call: ToolCall) -> str:
    """Name and arguments, with equal JSON objects spelled the same way."""
    try:
        arguments = fastjson.dumps(fastjson.loads(call.arguments or "{}"), sort_keys=True)
    except ValueError:
        arguments = call.arguments
    return f"{call.name} {arguments}"


def cycle_period(signatures: list[str]) -> int | None:
    """The period of a cycle the newest signatures complete, None when there is none.

    A cycle of period p needs max(3, 2p) calls: three identical calls in a row, or two full
    rounds of a longer pattern.
    """
    for period in range(1, MAX_PERIOD + 1):
        need = max(3, 2 * period)
        if len(signatures) < need:
            return None
        tail = signatures[-need:]
        if all(tail[i] == tail[i + period] for i in range(need - period)):
            return period
    return None


@dataclass
class GuardDecision:
    """What the loop guard allows of one batch of tool calls."""

    refused: list[int] = field(default_factory=list)
    """Indices of the calls that must not run."""
    stop_reason: str | None = None
    """Set when the turn must end now (no call of the batch runs)."""


@dataclass
class LoopGuard:
    """One turn's record of tool calls and how far the guard has escalated."""

    signatures: list[str] = field(default_factory=list)
    results: list[str | None] = field(default_factory=list)
    """A digest of each call's result, aligned with `signatures` (None until it ran)."""
    level: int = 0
    _note: str | None = None

    def record_results(self, contents: list[str | None]) -> None:
        """The results of the batch just reviewed, in call order (None: refused, not run)."""
        start = len(self.signatures) - len(contents)
        for offset, content in enumerate(contents):
            if content is not None:
                digest = hashlib.blake2b(content.encode("utf-8", "replace"), digest_size=8)
                self.results[start + offset] = digest.hexdigest()

    def _progressing(self, window: int) -> bool:
        """Whether some call in the newest `window` entries gave differing results."""
        seen: dict[str, str] = {}
        for sig, result in zip(self.signatures[-window:], self.results[-window:], strict=True):
            if result is None:
                continue
            if seen.setdefault(sig, result) != result:
                return True
        return False

    def take_note(self) -> str | None:
        """The warning for the next request, once."""
        note, self._note = self._note, None
        return note

    def review(self, calls: list[ToolCall]) -> GuardDecision:
        decision = GuardDecision()
        for index, call in enumerate(calls):
            self.signatures.append(signature(call))
            self.results.append(None)
            period = cycle_period(self.signatures)
            if period is None or self._progressing(max(3, 2 * period)):
                continue
            self.level += 1
            names = _names(self.signatures[-period:])
            if self.level == WARN:
                self._note = (
                    f"[Loop guard: you are repeating the same tool call{'s' * (period > 1)} "
                    f"({names}) with the same arguments; the results will not change. Use what "
                    "you already have, try a different approach, or answer the user. Repeating "
                    "it again will be refused.]"
                )
            elif self.level == REFUSE:
                decision.refused.append(index)
            else:
                decision.stop_reason = (
                    f"I stopped because I kept repeating the same tool call{'s' * (period > 1)} "
                    f"({names}) without making progress, even after being warned. Please check "
                    "the task or give me more guidance."
                )
                decision.refused = list(range(len(calls)))
                return decision
        return decision


REFUSED_RESULT = (
    "Error: not run. This exact call was already made repeatedly in this turn with the same "
    "arguments (loop guard). Use the earlier results, try something different, or answer the "
    "user."
)
STOPPED_RESULT = "Error: not run. The loop guard ended the turn: the same calls kept repeating."


def _names(cycle: list[str]) -> str:
    """The tool names in the cycle, in order of appearance."""
    return ", ".join(dict.fromkeys(entry.split(" ", 1)[0] for entry in cycle))
