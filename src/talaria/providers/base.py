"""What every provider shares beyond the core types: the wire API names, a stream handler
that drops everything, and the usage ledger by model.

The loop speaks only the types of `talaria.core` (`ModelRequest`, `ModelResponse`,
`ModelClient`): a provider adapter turns a request into its own wire format, calls the
endpoint, and turns the answer back into a response. Nothing provider-specific leaks past them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from talaria.core.model import Usage

API_MODES: tuple[str, ...] = ("chat_completions", "codex_responses", "anthropic_messages")


@dataclass(slots=True)
class UsageLedger:
    """Usage by (model, provider) with the number of answers: what the store keeps per turn
    for reports by model and by day."""

    entries: dict[tuple[str, str], tuple[Usage, int]] = field(default_factory=dict)

    def add(self, model: str, provider: str, usage: Usage, calls: int = 1) -> None:
        total, count = self.entries.get((model, provider), (Usage(), 0))
        total.add(usage)
        self.entries[(model, provider)] = (total, count + calls)

    def merge(self, other: UsageLedger) -> None:
        for (model, provider), (usage, calls) in other.entries.items():
            self.add(model, provider, usage, calls)


class NullStream:
    """A StreamHandler that drops everything (non-interactive use, side tasks)."""

    def text(self, delta: str) -> None:
        pass

    def reasoning(self, delta: str) -> None:
        pass

    def tool_call(self, index: int, call_id: str, name: str) -> None:
        pass

    def tool_arguments(self, index: int, delta: str) -> None:
        pass
