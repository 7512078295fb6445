"""The small interfaces the engine depends on, so that it depends on no implementation.

A model client (one endpoint and wire API), the handler its stream reports to, the session
log the loop writes through, the approver a front end or a library user supplies, and the
one a running tool asks through (`ToolContext.approver`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from talaria.core.messages import Message

if TYPE_CHECKING:
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
    """What the loop needs of a store: each session's messages, appended in order and
    loaded back, and its one writer's lease.

    Messages are addressed by (session_id, seq): appending a seq that is already stored is a
    no-op, so the loop can re-append after a crash without duplicating anything. Every call
    that writes has committed when it returns."""

    def append_messages(
        self,
        session_id: str,
        items: Sequence[tuple[int, Mapping[str, Any]]],
        *,
        writer: str | None = None,
    ) -> None:
        """Store (seq, message) pairs in one transaction; seqs already stored are skipped.
        With `writer`, the append checks (and renews) that writer's lease in the same
        transaction and raises `SessionBusy` when another writer holds the session.

        A store may also offer `try_append_messages(session_id, items, *, writer=None) ->
        bool`: the same append made on the caller's thread only if it cannot block (False,
        nothing written, otherwise). The loop calls it on the event loop's thread first and
        falls back to `append_messages` off the loop."""
        ...

    def claim_writer(self, session_id: str, owner: str, ttl: float = 120.0) -> None:
        """Become the session's one writer for `ttl` seconds (renewed by each append with
        `writer=owner`). Raises `SessionBusy` when another live owner holds it. An expired
        lease, or one whose owner process on this host is gone, is taken over."""
        ...

    def release_writer(self, session_id: str, owner: str) -> None:
        """Give the lease up (a no-op when `owner` does not hold it)."""
        ...

    def truncate_messages(self, session_id: str, keep: int) -> int:
        """Delete the session's messages with seq >= `keep` (undo, retry); the number deleted.
        They leave the search index too."""
        ...

    def load_messages(self, session_id: str) -> list[Message]: ...

    def message_count(self, session_id: str) -> int: ...


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


ApprovalVerdict: TypeAlias = Literal["approved", "denied", "timed_out", "no_one", "unattended"]
"""What came of asking: `approved` (by a grant, by `approvals.mode: off`, or by an answer),
`denied` (the answer was no), `timed_out` (unanswered within `approvals.timeout`), `no_one`
(no front end answers approvals: fail closed), `unattended` (approvals are off and this needs
a human's yes, so it is refused rather than asked)."""


class ToolApprover(Protocol):
    """How a running tool asks for a human's yes (`ToolContext.approver`): the same path the
    loop takes before a call, so grants already given count, `approvals.mode` applies, and the
    question is an `ApprovalRequested` event that whoever answers approvals sees (a front end,
    or the root agent for a sub-agent's calls). A tool that runs commands of its own (a
    sub-agent, code calling tools) asks here and does nothing unless the verdict is
    `approved`."""

    async def ask(
        self,
        command: str,
        reason: str,
        *,
        tool_name: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        needs_a_human: bool = False,
    ) -> ApprovalVerdict:
        """Ask whether `command` (what the user is shown and a grant remembers, exactly) may
        run, and why it needs asking. `tool_name` and `arguments` describe the call asking
        (default: the tool call this approver belongs to). `needs_a_human`: it would cross
        the sandbox the user chose, so approvals off refuse it instead of allowing it."""
        ...
