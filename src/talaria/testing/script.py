"""Script steps: what a scripted model answers, one step per model request.

The same steps drive the in-process `ScriptedModel` and the `ScriptedProvider` HTTP server, so
a test can move from a unit test to a wire-level test without rewriting its script.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class ScriptedCall:
    """A tool call the model makes. ``arguments`` may be a raw string (e.g. truncated JSON)."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(slots=True)
class Reply:
    """A successful answer: text and/or tool calls, optional reasoning."""

    text: str | None = None
    tool_calls: list[ScriptedCall] = field(default_factory=list)
    reasoning: str | None = None
    usage: dict[str, int] | None = None
    """Disjoint buckets (input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
    reasoning_tokens); each wire format reports them in its own provider's convention."""
    finish_reason: str | None = None
    """Defaults to tool_calls when there are calls, else stop. "length" simulates truncation."""
    refusal: str | None = None
    delay: float = 0.0
    """Seconds before the first byte."""
    chunk_delay: float = 0.0
    """Seconds between streamed chunks."""
    chunk_size: int = 8
    """Characters of text per streamed chunk."""


@dataclass(slots=True)
class Fail:
    """An HTTP error answer in the wire format's own error shape (or ``body`` verbatim)."""

    status: int
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    delay: float = 0.0


@dataclass(slots=True)
class Drop:
    """A stream that starts ``reply`` and drops the connection after ``after_chunks`` chunks.

    With ``clean=True`` the HTTP response ends properly there instead (its last chunk is
    sent), without the wire's closing events (a ``finish_reason`` or ``[DONE]``,
    ``response.completed``, ``message_stop``): what a proxy that times out a long answer
    produces. A client must not take what arrived for the whole answer.
    """

    reply: Reply
    after_chunks: int = 1
    clean: bool = False


@dataclass(slots=True)
class Stall:
    """A stream that starts ``reply`` then goes silent for ``seconds`` after ``after_chunks``."""

    reply: Reply
    after_chunks: int = 1
    seconds: float = 30.0


@dataclass(slots=True)
class Endless:
    """A stream that sends ``text`` every ``interval`` seconds and never ends (until the client
    gives up or the server stops): no timeout on silence can catch it."""

    text: str = "more "
    interval: float = 0.05


@dataclass(slots=True)
class Malformed:
    """A 200 answer whose body is not what the wire format promises (``raw`` verbatim)."""

    raw: str = "{not json"


Step = Reply | Fail | Drop | Stall | Malformed | Endless
StepSource = Step | Callable[[dict[str, Any]], Step]
"""A step, or a function of the request body that returns one."""


def text(content: str, **kwargs: Any) -> Reply:
    """A plain text answer."""
    return Reply(text=content, **kwargs)


def call(name: str, arguments: dict[str, Any] | str | None = None, **kwargs: Any) -> Reply:
    """A single tool call."""
    return Reply(
        tool_calls=[ScriptedCall(name, arguments if arguments is not None else {})], **kwargs
    )


def calls(*items: tuple[str, dict[str, Any] | str], **kwargs: Any) -> Reply:
    """Several tool calls in one answer (the loop runs them in parallel)."""
    return Reply(tool_calls=[ScriptedCall(name, args) for name, args in items], **kwargs)


class Script:
    """Hands out steps in order; a callable step is called with the request body.

    When the steps run out, answers with `fallback` (a function of the request) or raises
    `ScriptExhausted`, so a test never hangs on a missing step.
    """

    def __init__(
        self,
        steps: list[StepSource] | None = None,
        fallback: Callable[[dict[str, Any]], Step] | None = None,
    ) -> None:
        self._steps = list(steps or [])
        self._fallback = fallback
        self._ids = itertools.count(1)
        self.consumed = 0

    def add(self, *steps: StepSource) -> None:
        self._steps.extend(steps)

    @property
    def remaining(self) -> int:
        return len(self._steps)

    def next(self, request: dict[str, Any]) -> Step:
        if self._steps:
            source = self._steps.pop(0)
        elif self._fallback is not None:
            source = self._fallback
        else:
            raise ScriptExhausted(f"script exhausted after {self.consumed} steps")
        self.consumed += 1
        step = source(request) if callable(source) else source
        return self._with_ids(step)

    def _with_ids(self, step: Step) -> Step:
        reply = step if isinstance(step, Reply) else getattr(step, "reply", None)
        if isinstance(reply, Reply):
            for scripted in reply.tool_calls:
                if scripted.id is None:
                    scripted.id = f"call_{next(self._ids):04d}"
        return step


class ScriptExhausted(RuntimeError):
    """The model was asked more often than the script has steps."""
