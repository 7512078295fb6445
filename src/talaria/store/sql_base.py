"""What the SQLite and PostgreSQL stores share: the same statements and rules, written once.

Both drivers' connections answer `execute(sql, params)` with rows indexed by column name; what
differs is the parameter mark (`?` or `%s`), the insertion-order column, row locks, and how a
transaction is opened. So statements are written with `?` and rendered for the backend, and a
backend supplies `_read`/`_write` (one transaction around `work`, nested ones joining the
caller's) plus what truly differs: appends, truncation, deletion and search (the full-text
indexes are not alike).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Self, TypeVar, cast

from talaria.core import Message
from talaria.store.base import (
    AmbiguousSession,
    SearchHit,
    SessionExists,
    SessionInfo,
    SessionNotFound,
    SessionStore,
    StoreError,
    TitleInUse,
    UsageRecord,
    copy_session,
    hand_over,
    lease_expiry,
)
from talaria.store.ledger import SqlLedger
from talaria.store.schema import (
    MESSAGE_COLUMNS,
    USAGE_COLUMNS,
    decode_message,
    dumps,
    session_info,
    usage_record,
    usage_values,
)

T = TypeVar("T")
Conn = Any
"""A DB-API connection of either driver (sqlite3 or psycopg, rows by column name)."""

MIN_PREFIX = 6
RANK_WINDOW = 2000
"""Search ranks among at most this many of the newest matches: ranking costs about a
microsecond per match, so a word found in every message must not rank the whole history."""
_PREVIEW = (
    "(SELECT {col} FROM messages p WHERE p.session_id = s.id AND p.role = 'user' "
    "ORDER BY p.seq LIMIT 1)"
)
SESSION_COLUMNS = (
    "s.id, s.title, s.source, s.model, s.provider, s.api_mode, s.system_prompt, "
    "s.parent_session_id, s.cwd, s.created_at, s.updated_at, s.ended_at, s.end_reason, "
    f"s.message_count, s.usage, {_PREVIEW.format(col='content')} AS preview, "
    f"{_PREVIEW.format(col='content_is_json')} AS preview_is_json"
)


@dataclass(frozen=True, slots=True)
class Dialect:
    """What differs in SQL between the backends."""

    mark: str
    """The driver's parameter mark."""
    order: str
    """The column that orders rows by insertion (ties of `updated_at`)."""
    lock: str
    """What makes a SELECT lock the rows it reads until the transaction ends."""

    def sql(self, text: str) -> str:
        return _render(text, self.mark)


@lru_cache(maxsize=256)
def _render(text: str, mark: str) -> str:
    return text if mark == "?" else text.replace("?", mark)


def message_rows(
    items: Sequence[tuple[int, Mapping[str, Any]]],
) -> Sequence[tuple[int, Mapping[str, Any]]]:
    """`items` after checking every seq (StoreError before anything is written)."""
    for seq, _ in items:
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise StoreError(f"message seq must be a non-negative int, got {seq!r}")
    return items


def check_keep(keep: object) -> int:
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
        raise StoreError(f"keep must be a non-negative int, got {keep!r}")
    return keep


class SqlSessionStore(SqlLedger, ABC):
    """The `SessionStore` methods whose SQL is the same on both backends (and the gateway's
    delivery ledger, `SqlLedger`)."""

    dialect: Dialect
    _clock: Callable[[], float]

    @abstractmethod
    def _read(self, work: Callable[[Conn], T]) -> T:
        """Run `work` on a connection for reading."""

    @abstractmethod
    def _write(self, work: Callable[[Conn], T]) -> T:
        """Run `work` in one write transaction."""

    @staticmethod
    def _text(value: str | None) -> str | None:
        """A string as the backend can store it (PostgreSQL text holds no NUL)."""
        return value

    def _run(self, conn: Conn, sql: str, params: Any = ()) -> Any:
        return conn.execute(self.dialect.sql(sql), params)

    @abstractmethod
    def close(self) -> None:
        """Release the backend's connections; never raises."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- sessions -----------------------------------------------------------------------

    def _require(self, conn: Conn, session_id: str, *, lock: bool = False) -> None:
        sql = "SELECT 1 FROM sessions WHERE id = ?" + (self.dialect.lock if lock else "")
        if self._run(conn, sql, (session_id,)).fetchone() is None:
            raise SessionNotFound(f"no session with id {session_id!r}")

    def _check_title(self, conn: Conn, title: str, session_id: str) -> None:
        if title == "latest":
            raise StoreError("'latest' is reserved for the most recent session; pick another")
        row = self._run(conn, "SELECT id FROM sessions WHERE title = ?", (title,)).fetchone()
        if row is not None and row["id"] != session_id:
            raise TitleInUse(f"title {title!r} is already used by session {row['id']}")

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
    ) -> None:
        title = (title or "").strip() or None
        now = self._clock()

        def work(conn: Conn) -> None:
            if self._run(conn, "SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
                raise SessionExists(f"a session with id {session_id!r} already exists")
            if parent_session_id is not None:
                self._require(conn, parent_session_id)
            if title is not None:
                self._check_title(conn, title, session_id)
            self._run(
                conn,
                "INSERT INTO sessions (id, title, source, model, provider, api_mode, "
                "system_prompt, parent_session_id, cwd, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, title, source, model, provider, api_mode, self._text(system_prompt),
                 parent_session_id, cwd, now, now),
            )  # fmt: skip

        self._write(work)

    def get_session(self, session_id: str) -> SessionInfo | None:
        rows = self._select_sessions("WHERE s.id = ?", (session_id,))
        return rows[0] if rows else None

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
        now = self._clock()
        fields: dict[str, Any] = {
            k: v
            for k, v in (
                ("title", (title or "").strip() or None),
                ("model", model),
                ("provider", provider),
                ("api_mode", api_mode),
                ("system_prompt", self._text(system_prompt)),
                ("end_reason", end_reason),
            )
            if v is not None
        }
        if usage is not None:
            fields["usage"] = dumps(usage)
        if ended:
            fields["ended_at"] = now
        fields["updated_at"] = now

        def work(conn: Conn) -> None:
            self._require(conn, session_id)
            if "title" in fields:
                self._check_title(conn, fields["title"], session_id)
            assignments = ", ".join(f"{name} = ?" for name in fields)
            self._run(
                conn,
                f"UPDATE sessions SET {assignments} WHERE id = ?",
                (*fields.values(), session_id),
            )

        self._write(work)

    def rename(self, session_id: str, title: str | None) -> None:
        clean = (title or "").strip() or None

        def work(conn: Conn) -> None:
            self._require(conn, session_id)
            if clean is not None:
                self._check_title(conn, clean, session_id)
            self._run(conn, "UPDATE sessions SET title = ? WHERE id = ?", (clean, session_id))

        self._write(work)

    def _select_sessions(self, where: str, params: tuple[Any, ...]) -> list[SessionInfo]:
        sql = f"SELECT {SESSION_COLUMNS} FROM sessions s {where}"
        rows = self._read(lambda conn: self._run(conn, sql, params).fetchall())
        return [session_info(row) for row in rows]

    def list_sessions(
        self,
        limit: int = 20,
        offset: int = 0,
        source: str | None = None,
        cwd: str | None = None,
    ) -> list[SessionInfo]:
        filters = {"s.source = ?": source, "s.cwd = ?": cwd}
        chosen = {clause: value for clause, value in filters.items() if value is not None}
        where = f"WHERE {' AND '.join(chosen)}" if chosen else ""
        params: tuple[Any, ...] = tuple(chosen.values())
        return self._select_sessions(
            f"{where} ORDER BY s.updated_at DESC, s.{self.dialect.order} DESC LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )

    def recent(self, limit: int) -> list[SessionInfo]:
        return self._select_sessions(
            f"WHERE s.message_count > 0 ORDER BY s.updated_at DESC, s.{self.dialect.order} DESC "
            "LIMIT ?",
            (limit,),
        )

    def resolve(self, ref: str) -> str:
        ref = ref.strip()
        return self._read(lambda conn: self._resolve(conn, ref))

    def _resolve(self, conn: Conn, ref: str) -> str:
        for column in ("id", "title"):
            row = self._run(conn, f"SELECT id FROM sessions WHERE {column} = ?", (ref,)).fetchone()
            if row is not None:
                return str(row["id"])
        same_words = "SELECT id FROM sessions WHERE lower(title) = lower(?) ORDER BY id LIMIT 20"
        titled = self._run(conn, same_words, (ref,)).fetchall()
        if len(titled) == 1:
            return str(titled[0]["id"])
        if titled:
            raise AmbiguousSession(ref, [str(r["id"]) for r in titled])
        if ref == "latest":
            row = self._run(
                conn,
                f"SELECT id FROM sessions ORDER BY updated_at DESC, {self.dialect.order} DESC "
                "LIMIT 1",
            ).fetchone()
            if row is None:
                raise SessionNotFound("there are no sessions yet")
            return str(row["id"])
        if len(ref) >= MIN_PREFIX:
            rows = self._run(
                conn,
                "SELECT id FROM sessions WHERE substr(id, 1, ?) = ? ORDER BY id LIMIT 20",
                (len(ref), ref),
            ).fetchall()
            if len(rows) == 1:
                return str(rows[0]["id"])
            if rows:
                raise AmbiguousSession(ref, [str(r["id"]) for r in rows])
        hint = "" if len(ref) >= MIN_PREFIX else f" (id prefixes need {MIN_PREFIX}+ chars)"
        raise SessionNotFound(f"no session matches {ref!r}{hint}")

    # -- the one-writer lease -----------------------------------------------------------

    def claim_writer(self, session_id: str, owner: str, ttl: float = 120.0) -> None:
        def work(conn: Conn) -> None:
            self._require(conn, session_id)
            self._take_lease(conn, session_id, owner, ttl=ttl)

        self._write(work)

    def release_writer(self, session_id: str, owner: str) -> None:
        sql = "DELETE FROM session_writers WHERE session_id = ? AND owner = ?"
        self._write(lambda conn: self._run(conn, sql, (session_id, owner)))

    def _take_lease(
        self,
        conn: Conn,
        session_id: str,
        owner: str,
        *,
        ttl: float | None = None,
        renew_only: bool = False,
    ) -> None:
        """In the caller's write transaction: make `owner` the lease holder or raise
        SessionBusy. `renew_only` (an append) extends a lease it holds, re-takes a free one."""
        row = self._run(
            conn,
            "SELECT owner, expires_at FROM session_writers WHERE session_id = ?"
            + self.dialect.lock,
            (session_id,),
        ).fetchone()
        held = (row["owner"], row["expires_at"]) if row is not None else None
        expires = lease_expiry(
            session_id, held, owner, self._clock(), ttl=ttl, renew_only=renew_only
        )
        if held == (owner, expires):
            return
        self._run(
            conn,
            "INSERT INTO session_writers (session_id, owner, expires_at) VALUES (?, ?, ?) "
            "ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, "
            "expires_at = excluded.expires_at",
            (session_id, owner, expires),
        )

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
        fields = {"model": model, "provider": provider, "api_mode": api_mode,
                  "system_prompt": system_prompt, "state": state, "writer": writer}  # fmt: skip
        store = cast("SessionStore", self)
        self._write(lambda conn: hand_over(store, parent_id, child_id, messages, **fields))

    def fork_session(self, source_id: str, fork_id: str, *, title: str | None = None) -> None:
        store = cast("SessionStore", self)
        self._write(lambda conn: copy_session(store, source_id, fork_id, title))

    # -- messages -----------------------------------------------------------------------

    def load_messages(self, session_id: str) -> list[Message]:
        def work(conn: Conn) -> list[Any]:
            self._require(conn, session_id)
            return list(
                self._run(
                    conn,
                    f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq",
                    (session_id,),
                ).fetchall()
            )

        return [decode_message(row) for row in self._read(work)]

    def message_count(self, session_id: str) -> int:
        sql = "SELECT message_count FROM sessions WHERE id = ?"
        row = self._read(lambda conn: self._run(conn, sql, (session_id,)).fetchone())
        if row is None:
            raise SessionNotFound(f"no session with id {session_id!r}")
        return int(row["message_count"])

    def _count_messages(self, conn: Conn, session_id: str, delta: int, now: float) -> None:
        """In an append's or a truncation's transaction: the session's count moves by `delta`."""
        if delta:
            self._run(
                conn,
                "UPDATE sessions SET message_count = message_count + ?, updated_at = ? "
                "WHERE id = ?",
                (delta, now, session_id),
            )

    def _neighbours(self, conn: Conn, session_id: str, seq: int) -> list[Message]:
        """The message before `seq`, the message itself and the one after it."""
        rows = self._run(
            conn,
            f"SELECT * FROM (SELECT seq, {MESSAGE_COLUMNS} FROM messages "
            f" WHERE session_id = ? AND seq < ? ORDER BY seq DESC LIMIT 1) AS b "
            f"UNION ALL SELECT * FROM (SELECT seq, {MESSAGE_COLUMNS} FROM messages "
            f" WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT 2) AS a",
            (session_id, seq, session_id, seq),
        ).fetchall()
        return [decode_message(row) for row in sorted(rows, key=lambda r: r["seq"])]

    def _hits(self, conn: Conn, rows: list[Any]) -> list[SearchHit]:
        """Search rows (session_id, title, seq, role, created_at, snippet) as hits."""
        return [
            SearchHit(
                session_id=row["session_id"],
                session_title=row["title"],
                message_seq=row["seq"],
                role=row["role"],
                snippet=row["snippet"],
                created_at=row["created_at"],
                context=self._neighbours(conn, row["session_id"], row["seq"]),
            )
            for row in rows
        ]

    # -- usage and state ----------------------------------------------------------------

    def record_usage(self, session_id: str, records: list[UsageRecord]) -> None:
        now = self._clock()
        rows = [usage_values(session_id, now, record) for record in records]
        if not rows:
            return
        sql = self.dialect.sql(
            f"INSERT INTO usage_records ({USAGE_COLUMNS}) VALUES ({', '.join('?' * len(rows[0]))})"
        )

        def work(conn: Conn) -> None:
            self._require(conn, session_id)
            conn.cursor().executemany(sql, rows)

        self._write(work)

    def usage_records(
        self, since: float | None = None, session_id: str | None = None
    ) -> list[UsageRecord]:
        sql = (
            f"SELECT {USAGE_COLUMNS} FROM usage_records WHERE created_at >= ? "
            "AND (CAST(? AS TEXT) IS NULL OR session_id = ?) ORDER BY created_at, id"
        )
        params = (since if since is not None else float("-inf"), session_id, session_id)
        rows = self._read(lambda conn: self._run(conn, sql, params).fetchall())
        return [usage_record(row) for row in rows]

    def get_state(self, session_id: str, key: str) -> Any:
        sql = "SELECT value FROM session_state WHERE session_id = ? AND key = ?"
        row = self._read(lambda conn: self._run(conn, sql, (session_id, key)).fetchone())
        return None if row is None else json.loads(row["value"])

    def set_state(self, session_id: str, key: str, value: Any) -> None:
        encoded = dumps(value)
        now = self._clock()

        def work(conn: Conn) -> None:
            self._require(conn, session_id)
            self._run(
                conn,
                "INSERT INTO session_state (session_id, key, value, updated_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (session_id, key) "
                "DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                (session_id, key, encoded, now),
            )

        self._write(work)
