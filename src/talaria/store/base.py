"""The session store contract: what the loop, the CLI and the agent tools may ask of any backend.

The protocol is deliberately small and message-oriented so that a backend (SQLite today,
PostgreSQL later) can be checked by one shared test kit (`talaria.store.conformance`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class StoreError(Exception):
    """A storage failure the caller can show to a user (locked database, bad schema, ...)."""


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
    context: list[dict[str, Any]] = field(default_factory=list)


def content_text(content: Any) -> str:
    """The readable text of a message content (a string or a list of typed parts); backends
    index it for search and tools quote it."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        return "\n".join(t for t in texts if isinstance(t, str))
    return ""


class SessionStore(Protocol):
    """Durable sessions and their messages.

    Messages are addressed by (session_id, seq): appending a seq that is already stored is a
    no-op, so the loop can re-append after a crash without duplicating anything. Every call
    that writes has committed when it returns.
    """

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
        usage: dict[str, Any] | None = None,
        end_reason: str | None = None,
        ended: bool = False,
    ) -> None:
        """None leaves a field unchanged; `usage` replaces the stored totals (the caller sums:
        it knows which counters add up and which do not)."""
        ...

    def append_messages(self, session_id: str, items: list[tuple[int, dict[str, Any]]]) -> None:
        """Store (seq, message) pairs in one transaction; seqs already stored are skipped."""
        ...

    def load_messages(self, session_id: str) -> list[dict[str, Any]]: ...

    def message_count(self, session_id: str) -> int: ...

    def resolve(self, ref: str) -> str:
        """Exact id, exact title, "latest", or a unique id prefix of at least 6 characters."""
        ...

    def list_sessions(
        self, limit: int = 20, offset: int = 0, source: str | None = None
    ) -> list[SessionInfo]: ...

    def search(
        self, query: str, limit: int = 10, exclude_session: str | None = None
    ) -> list[SearchHit]: ...

    def recent(self, limit: int) -> list[SessionInfo]:
        """The most recently active sessions that hold at least one message."""
        ...

    def get_state(self, session_id: str, key: str) -> Any: ...

    def set_state(self, session_id: str, key: str, value: Any) -> None: ...

    def rename(self, session_id: str, title: str | None) -> None: ...

    def delete_session(self, session_id: str) -> None: ...

    def close(self) -> None: ...
