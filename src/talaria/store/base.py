"""The session store contract: what the loop, the CLI and the agent tools may ask of any backend.

The protocol is deliberately small and message-oriented so that a backend (SQLite today,
PostgreSQL later) can be checked by one shared test kit (`talaria.testing.store_conformance`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from talaria.core import Message
from talaria.core.protocols import SessionLog


class StoreError(Exception):
    """A storage failure the caller can show to a user (locked database, bad schema, ...)."""


class StoreLocked(StoreError):
    """Another process kept the database locked longer than the store waits (its stated limit)."""


class StoreCorrupt(StoreError):
    """The database file is damaged or not a database; talaria leaves it untouched."""


class StoreUnwritable(StoreError):
    """The database cannot be written: a read-only file or directory, a full or failing disk."""


class SessionNotFound(StoreError, KeyError):
    """No session matches the id or reference."""

    def __str__(self) -> str:  # KeyError would wrap the message in quotes
        return str(self.args[0]) if self.args else "session not found"


class AmbiguousSession(StoreError):
    """A reference matches several sessions; `candidates` lists their ids."""

    def __init__(self, ref: str, candidates: list[str]) -> None:
        self.ref = ref
        self.candidates = candidates
        super().__init__(
            f"{ref!r} matches {len(candidates)} sessions: {', '.join(candidates)}; "
            "use a longer prefix or the full id"
        )


class SessionExists(StoreError):
    """`create_session` was given an id that is already taken."""


class TitleInUse(StoreError):
    """Titles name sessions for `--resume <title>`, so two sessions cannot share one."""


class SessionBusy(StoreError):
    """Another live writer holds the session: one writer at a time, never silent loss."""


class SearchQueryError(StoreError, ValueError):
    """The search text cannot be turned into a query (e.g. it holds no searchable word)."""


@dataclass(slots=True)
class SessionInfo:
    """One session's metadata row; `usage` holds the session's token and cost totals."""

    id: str
    title: str | None = None
    source: str = "api"
    model: str | None = None
    provider: str | None = None
    api_mode: str | None = None
    system_prompt: str | None = None
    parent_session_id: str | None = None
    cwd: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    ended_at: float | None = None
    end_reason: str | None = None
    message_count: int = 0
    usage: dict[str, Any] = field(default_factory=dict)
    preview: str = ""
    """The start of the first user message, for session lists (not part of the stored row)."""


@dataclass(slots=True)
class SearchHit:
    """One matching message, with its neighbours so a reader sees the exchange around it."""

    session_id: str
    session_title: str | None
    message_seq: int
    role: str
    snippet: str
    created_at: float
    context: list[Message] = field(default_factory=list)


def new_writer_id() -> str:
    """A lease owner: host and pid (so a dead process's lease can be taken over at once),
    plus a random part (two agents of one process are two writers)."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"


def lease_is_stale(owner: str, expires_at: float, now: float) -> bool:
    """Whether a lease held by `owner` may be taken over: it expired, or its owner process
    ran on this host and is gone."""
    if expires_at <= now:
        return True
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


LEASE_RENEWAL = 120.0
"""Seconds an append extends its writer's lease to, once less than half of that is left (so
that most appends leave the lease row alone: one page less to write per step)."""


def lease_expiry(
    session_id: str,
    held: tuple[str, float] | None,
    owner: str,
    now: float,
    *,
    ttl: float | None = None,
    renew_only: bool = False,
) -> float:
    """When `owner`'s lease should expire, given the lease `held` now as (owner, expires_at);
    SessionBusy when another live writer holds it. `renew_only` (an append) extends a lease
    the owner holds (see LEASE_RENEWAL) and re-takes a free one. An unchanged answer needs no
    write. Every backend decides through this."""
    if held is not None and held[0] != owner and not lease_is_stale(held[0], held[1], now):
        raise SessionBusy(busy_message(session_id, held[0]))
    if renew_only and held is not None and held[0] == owner:
        if held[1] - now >= LEASE_RENEWAL / 2:
            return held[1]
        ttl = max(held[1] - now, LEASE_RENEWAL)
    return now + (ttl if ttl is not None else LEASE_RENEWAL)


def busy_message(session_id: str, owner: str) -> str:
    host, _, rest = owner.partition(":")
    return (
        f"session busy: {session_id} is being written by another agent "
        f"(process {rest.partition(':')[0]} on {host}); wait for its turn to end or use "
        "another session"
    )


@dataclass(slots=True)
class UsageRecord:
    """What one session spent on one model in one turn: the unit `talaria usage` adds up.

    `usage` has the disjoint buckets of `Usage.to_dict()`; its `estimated_cost_usd` is None when
    the model's price is unknown. A child agent's calls are recorded in the child's session
    only, so summing records never counts anything twice.
    """

    session_id: str
    model: str
    provider: str
    calls: int
    usage: dict[str, Any]
    created_at: float = 0.0
    """Set by the store when the record is saved."""


def content_text(content: Any) -> str:
    """The readable text of a message content (a string or a list of typed parts); backends
    index it for search and tools quote it."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        return "\n".join(t for t in texts if isinstance(t, str))
    return ""


class SessionCatalogue(Protocol):
    """The sessions themselves: creating, finding, describing, forking and ending them,
    and the small state each keeps (its task list, its setup)."""

    def create_session(
        self,
        session_id: str,
        *,
        source: str = "api",
        model: str | None = None,
        provider: str | None = None,
        api_mode: str | None = None,
        system_prompt: str | None = None,
        parent_session_id: str | None = None,
        title: str | None = None,
        cwd: str | None = None,
    ) -> None: ...

    def get_session(self, session_id: str) -> SessionInfo | None: ...

    def update_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        model: str | None = None,
        provider: str | None = None,
        api_mode: str | None = None,
        system_prompt: str | None = None,
        usage: Mapping[str, Any] | None = None,
        end_reason: str | None = None,
        ended: bool = False,
    ) -> None:
        """None leaves a field unchanged; `usage` replaces the stored totals (the caller sums:
        it knows which counters add up and which do not)."""
        ...

    def continue_in_child(
        self,
        parent_id: str,
        child_id: str,
        messages: list[Message],
        *,
        model: str | None = None,
        provider: str | None = None,
        api_mode: str | None = None,
        system_prompt: str | None = None,
        state: dict[str, Any] | None = None,
        writer: str | None = None,
    ) -> None:
        """Compression's hand-over, in ONE transaction: create the child (lineage, source and
        cwd from the parent), end the parent as compressed, move its title, store `state` keys
        and `messages` (seq 0..) in the child and move `writer`'s lease. A crash leaves either
        the parent live or the child complete, never a half."""
        ...

    def fork_session(self, source_id: str, fork_id: str, *, title: str | None = None) -> None:
        """A copy in ONE transaction: create `fork_id` with the source's source, model,
        provider, API mode, system prompt and cwd (and `title`), copy every message and set
        its state `forked_from` to `source_id`. A failure leaves no fork behind."""
        ...

    def resolve(self, ref: str) -> str:
        """Exact id, exact title, a title in any case (when only one matches), "latest", or a
        unique id prefix of at least 6 characters."""
        ...

    def list_sessions(
        self,
        limit: int = 20,
        offset: int = 0,
        source: str | None = None,
        cwd: str | None = None,
    ) -> list[SessionInfo]:
        """Newest activity first; `source` and `cwd` (the exact directory) narrow the list."""
        ...

    def get_state(self, session_id: str, key: str) -> Any: ...

    def set_state(self, session_id: str, key: str, value: Any) -> None: ...

    def rename(self, session_id: str, title: str | None) -> None: ...

    def delete_session(self, session_id: str) -> None: ...


class SessionSearch(Protocol):
    """Full-text search over past sessions."""

    def search(
        self, query: str, limit: int = 10, exclude_session: str | None = None
    ) -> list[SearchHit]: ...

    def recent(self, limit: int) -> list[SessionInfo]:
        """The most recently active sessions that hold at least one message."""
        ...


class UsageBook(Protocol):
    """What each session spent, by model, for reports."""

    def record_usage(self, session_id: str, records: list[UsageRecord]) -> None:
        """Save per-model usage records for a session, stamped with the store's clock."""
        ...

    def usage_records(
        self, since: float | None = None, session_id: str | None = None
    ) -> list[UsageRecord]:
        """Records saved at or after `since` (all when None), oldest first."""
        ...


class SessionStore(SessionLog, SessionCatalogue, SessionSearch, UsageBook, Protocol):
    """A complete backend (SQLite, PostgreSQL): every part above, and `close`."""

    def close(self) -> None: ...


def hand_over(
    store: SessionStore,
    parent_id: str,
    child_id: str,
    messages: list[Message],
    **child: Any,
) -> None:
    """The steps of `continue_in_child` (`child` holds model, provider, api_mode,
    system_prompt, state and writer); each backend runs them inside one transaction."""
    state: dict[str, Any] = child.pop("state", None) or {}
    writer: str | None = child.pop("writer", None)
    parent = store.get_session(parent_id)
    if parent is None:
        raise SessionNotFound(f"no session with id {parent_id!r}")
    store.create_session(
        child_id, source=parent.source, parent_session_id=parent_id, cwd=parent.cwd, **child
    )
    store.update_session(parent_id, end_reason="compressed", ended=True)
    if parent.title:
        store.rename(parent_id, None)
        store.rename(child_id, parent.title)
    for key, value in state.items():
        store.set_state(child_id, key, value)
    if writer is not None:
        store.release_writer(parent_id, writer)
        store.claim_writer(child_id, writer)
    store.append_messages(child_id, list(enumerate(messages)), writer=writer)


def copy_session(store: SessionStore, source_id: str, fork_id: str, title: str | None) -> None:
    """The steps of `fork_session`; each backend runs them inside one transaction, so the
    messages copied are the ones stored when it began."""
    source = store.get_session(source_id)
    if source is None:
        raise SessionNotFound(f"no session with id {source_id!r}")
    store.create_session(
        fork_id,
        source=source.source,
        model=source.model,
        provider=source.provider,
        api_mode=source.api_mode,
        system_prompt=source.system_prompt,
        title=title,
        cwd=source.cwd,
    )
    store.append_messages(fork_id, list(enumerate(store.load_messages(source_id))))
    store.set_state(fork_id, "forked_from", source_id)
