"""The one contract every wire API implements.

The loop speaks only these types. A provider adapter turns a `ModelRequest` (canonical,
already-repaired OpenAI-style messages) into its own wire format, calls the endpoint, and turns
the answer back into a `ModelResponse`. Nothing provider-specific leaks past this module.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal, Protocol

from talaria.values import mutable

API_MODES: tuple[str, ...] = ("chat_completions", "codex_responses", "anthropic_messages")

Message = dict[str, Any]
"""A canonical message: OpenAI chat format, reasoning in ``assistant["reasoning"]``."""


@mutable(slots=True)
class ToolCall:
    """One function call requested by the model; ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@mutable(slots=True)
class Usage:
    """Token usage in disjoint buckets.

    ``input_tokens`` counts only input that was neither read from nor written to the prompt
    cache, whatever convention the provider reports in. ``reasoning_tokens`` is the part of
    ``output_tokens`` spent on reasoning (informational, not added twice).
    ``estimated_cost_usd`` is None once any priced call had an unknown price.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    estimated_cost_usd: float | None = 0.0

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    @property
    def prompt_tokens(self) -> int:
        """Everything the model read this call: the size of the context it saw."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.reasoning_tokens += other.reasoning_tokens
        if self.estimated_cost_usd is None or other.estimated_cost_usd is None:
            self.estimated_cost_usd = None
        else:
            self.estimated_cost_usd += other.estimated_cost_usd

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "total_tokens": self.total_tokens,
            "estimated_cost_usd": self.estimated_cost_usd,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        return cls(
            input_tokens=int(data.get("input_tokens") or 0),
            output_tokens=int(data.get("output_tokens") or 0),
            cache_read_tokens=int(data.get("cache_read_tokens") or 0),
            cache_write_tokens=int(data.get("cache_write_tokens") or 0),
            reasoning_tokens=int(data.get("reasoning_tokens") or 0),
            estimated_cost_usd=data.get("estimated_cost_usd", 0.0),
        )


@mutable(slots=True)
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


@mutable(slots=True)
class ModelRequest:
    """What the loop asks of a model: canonical messages (system first) and tool schemas."""

    messages: list[Message]
    tools: list[dict[str, Any]] = field(default_factory=list)
    """OpenAI function-tool schemas (``{"type": "function", "function": {...}}``), fixed order."""
    max_tokens: int | None = None
    tool_choice: Literal["auto", "none"] = "auto"
    stream: bool = True
    temperature: float | None = None
    cache_ttl: str | None = None
    """Prompt-cache TTL ("5m" or "1h") where the wire API takes explicit markers; None = off."""
    extra_body: dict[str, Any] | None = None


@mutable(slots=True)
class ModelResponse:
    """A complete answer, whatever wire API produced it."""

    text: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    reasoning_details: dict[str, Any] | None = None
    """Opaque replay state (thinking signatures, encrypted reasoning items), tagged with its
    source so that it is replayed only to the endpoint that issued it:
    ``{"source": "<api_mode>|<base_url>", "items": [...]}``."""
    finish_reason: str = "stop"
    """stop | tool_calls | length | content_filter | refusal"""
    refusal: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    response_id: str | None = None

    def to_message(self) -> Message:
        """The canonical assistant message to append to the history."""
        message: Message = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.reasoning:
            message["reasoning"] = self.reasoning
        if self.reasoning_details:
            message["reasoning_details"] = self.reasoning_details
        return message


class StreamHandler(Protocol):
    """Receives what a streaming call produces, as it arrives."""

    def text(self, delta: str) -> None: ...

    def reasoning(self, delta: str) -> None: ...

    def tool_call(self, index: int, call_id: str, name: str) -> None:
        """A tool call's name is known (its arguments may still be streaming)."""
        ...

    def tool_arguments(self, index: int, delta: str) -> None:
        """More of a tool call's arguments arrived (a long file write streams for minutes)."""
        ...


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


class ModelClient(Protocol):
    """One endpoint + model + wire API. Adapters raise `ProviderError` on every failure."""

    provider: str
    model: str
    api_mode: str
    base_url: str

    async def complete(self, request: ModelRequest, stream: StreamHandler) -> ModelResponse: ...

    async def aclose(self) -> None: ...
