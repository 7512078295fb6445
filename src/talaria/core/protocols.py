"""The small interfaces the engine depends on, so that it depends on no implementation.

A model client (one endpoint and wire API), the handler its stream reports to, the session
log the loop writes through, and the approver a front end or a library user supplies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, TypeAlias

from talaria.core.messages import Message
from talaria.core.model import ModelRequest, ModelResponse


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


class ModelClient(Protocol):
    """One endpoint + model + wire API: the model caller. Adapters raise
    `talaria.providers.errors.ProviderError` on every failure."""

    provider: str
    model: str
    api_mode: str
    base_url: str

    async def complete(self, request: ModelRequest, stream: StreamHandler) -> ModelResponse: ...

    async def aclose(self) -> None: ...


class SessionLog(Protocol):
    """What the loop needs of a session store: an append-only log of messages with one
    writer at a time (synchronous: the loop calls it off the event loop)."""

    def append_messages(
        self,
        session_id: str,
        items: Sequence[tuple[int, Message]],
        *,
        writer: str | None = None,
    ) -> None:
        """Save `(seq, message)` pairs in one transaction."""
        ...

    def load_messages(self, session_id: str) -> list[Message]: ...

    def message_count(self, session_id: str) -> int: ...

    def truncate_messages(self, session_id: str, keep: int) -> int:
        """Drop every message after the first `keep`; how many were dropped."""
        ...

    def claim_writer(self, session_id: str, owner: str, ttl: float = 120.0) -> None:
        """Take the session's lease (`SessionBusy` while another live writer holds it)."""
        ...

    def release_writer(self, session_id: str, owner: str) -> None: ...


ApprovalDecision: TypeAlias = Literal["once", "session", "always", "deny"]


class ApprovalAsk(Protocol):
    """What an approver is shown: `command` (what would run) and `reason` (why it asks)."""

    @property
    def tool_name(self) -> str: ...

    @property
    def command(self) -> str: ...

    @property
    def reason(self) -> str: ...


class Approver(Protocol):
    """Decides whether a tool call that needs a human's yes may run
    (``approval_callback`` in the public API)."""

    def __call__(self, request: ApprovalAsk) -> ApprovalDecision: ...
