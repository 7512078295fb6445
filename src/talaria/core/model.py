"""What the loop asks of a model and what it gets back, whatever the wire API.

A provider adapter turns a `ModelRequest` (canonical, already-repaired messages) into its own
wire format and the answer back into a `ModelResponse`; telemetry, tools and the context engine
read these types without depending on any provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from talaria.core.messages import AssistantMessage, Message, ToolCallDict

if TYPE_CHECKING:
    from talaria.core.result import UsageDict


@dataclass(slots=True)
class ToolCall:
    """One function call requested by the model; ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str

    def to_dict(self) -> ToolCallDict:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(slots=True)
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

    def to_dict(self) -> UsageDict:
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
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        """From a stored or reported mapping; missing buckets count as 0."""
        return cls(
            input_tokens=int(data.get("input_tokens") or 0),
            output_tokens=int(data.get("output_tokens") or 0),
            cache_read_tokens=int(data.get("cache_read_tokens") or 0),
            cache_write_tokens=int(data.get("cache_write_tokens") or 0),
            reasoning_tokens=int(data.get("reasoning_tokens") or 0),
            estimated_cost_usd=data.get("estimated_cost_usd", 0.0),
        )


@dataclass(slots=True)
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


@dataclass(slots=True)
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

    def to_message(self) -> AssistantMessage:
        """The canonical assistant message to append to the history."""
        message: AssistantMessage = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.reasoning:
            message["reasoning"] = self.reasoning
        if self.reasoning_details:
            message["reasoning_details"] = self.reasoning_details
        return message
