"""The SQLite session store: one file, many processes, crash-safe appends, full-text search.

Durability comes from WAL + one `BEGIN IMMEDIATE` transaction per write that has committed
before the method returns, so a `kill -9` at any moment leaves a database that opens and whose
sessions load. Appends insert only the new rows (cost independent of history length).
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from talaria.store.base import (
    AmbiguousSession,
    SearchHit,
    SearchQueryError,
    SessionExists,
    SessionInfo,
    SessionNotFound,
    StoreError,
    TitleInUse,
    UsageRecord,
    copy_session,
    hand_over,
    lease_expiry,
)
from talaria.store.schema import (
    MESSAGE_COLUMNS,
    MIGRATIONS,
    SCHEMA_VERSION,
    USAGE_COLUMNS,
    decode_message,
    dumps,
    encode_message,
    fts_query,
    search_body,
    session_info,
    usage_record,
    usage_values,
)

T = TypeVar("T")

MIN_PREFIX = 6
RANK_WINDOW = 2000
"""Search ranks (bm25) among at most this many of the newest matches: ranking costs about a
microsecond per match, so a word found in every message must not rank the whole history."""
_INSERT_MESSAGE = (  # INSERT OR IGNORE: re-appending a stored seq is a no-op
    f"INSERT OR IGNORE INTO messages (session_id, seq, created_at, {MESSAGE_COLUMNS}) "
    f"VALUES (:session_id, :seq, :created_at, "
    f"{', '.join(':' + name.strip() for name in MESSAGE_COLUMNS.split(','))})"
)
_SESSION_COLUMNS = (
    "s.id, s.title, s.source, s.model, s.provider, s.api_mode, s.system_prompt, "
    "s.parent_session_id, s.cwd, s.created_at, s.updated_at, s.ended_at, s.end_reason, "
    "s.message_count, s.usage, "
    "(SELECT content FROM messages p WHERE p.session_id = s.id AND p.role = 'user' "
    " ORDER BY p.seq LIMIT 1) AS preview, "
    "(SELECT content_is_json FROM messages p WHERE p.session_id = s.id AND p.role = 'user' "
    " ORDER BY p.seq LIMIT 1) AS preview_is_json"
)


_SHARED: dict[tuple[int, str], SQLiteSessionStore] = {}
_SHARED_LOCK = threading.Lock()


def _is_busy(exc: sqlite3.Error) -> bool:
    message = str(exc).lower()
    return "locked" in message or "busy" in message


class SQLiteSessionStore:
    """`SessionStore` over one SQLite file; safe to share between threads and processes."""

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout: float = 10.0,
        max_retries: int = 6,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._max_retries = max_retries
        self._lock = threading.RLock()
        self._users = 1
        self._shared_key: tuple[int, str] | None = None
        self._tx_thread: int | None = None
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open session database {self.path}: {exc}") from exc
        self._conn.row_factory = sqlite3.Row
        self._read(lambda c: self._configure(c, busy_timeout))
        self._migrate()

    @classmethod
    def shared(cls, path: str | Path) -> SQLiteSessionStore:
        """The process's store for the file at `path`, one connection for every agent that
        uses it (a connection holds about 250 KB of caches). Each call needs its `close`."""
        key = (os.getpid(), str(Path(path).resolve()))  # a forked child opens its own
        with _SHARED_LOCK:
            store = _SHARED.get(key)
            if store is not None:
                store._users += 1
                return store
            store = cls(path)
            store._shared_key = key
            _SHARED[key] = store
            return store

    @staticmethod
    def _configure(conn: sqlite3.Connection, busy_timeout: float) -> None:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")

    def _migrate(self) -> None:
        def version(conn: sqlite3.Connection) -> int:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])

        def upgrade(conn: sqlite3.Connection) -> None:
            current = version(conn)  # again: another process may have migrated meanwhile
            for statements in MIGRATIONS[current:]:
                for statement in statements:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

        current = self._read(version)
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {current}, newer than this talaria "
                f"understands ({SCHEMA_VERSION}); upgrade talaria"
            )
        if current < SCHEMA_VERSION:
            self._write(upgrade)

    # -- transactions -------------------------------------------------------------------

    def _retrying(self, attempt_once: Callable[[], T]) -> T:
        """Run one attempt; on SQLITE_BUSY/locked back off with jitter and try again."""
        attempt = 0
        while True:
            try:
                return attempt_once()
            except sqlite3.OperationalError as exc:
                attempt += 1
                if not _is_busy(exc):
                    raise StoreError(f"session database error: {exc}") from exc
                if attempt >= self._max_retries:
                    raise StoreError(
                        f"session database {self.path} stayed locked after "
                        f"{attempt} attempts; another process holds it: {exc}"
                    ) from exc
                time.sleep(min(1.0, 0.02 * 2**attempt) * random.uniform(0.5, 1.5))
            except sqlite3.Error as exc:
                raise StoreError(f"session database error: {exc}") from exc

    def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        def attempt() -> T:
            with self._lock:
                return work(self._conn)

        return self._retrying(attempt)

    def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        if self._tx_thread == threading.get_ident():
            return work(self._conn)  # part of an enclosing write: one transaction

        def attempt() -> T:
            with self._lock:
                self._conn.execute("BEGIN IMMEDIATE")
                self._tx_thread = threading.get_ident()
                try:
                    result = work(self._conn)
                    self._conn.execute("COMMIT")
                except BaseException:
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    raise
                finally:
                    self._tx_thread = None
                return result

        return self._retrying(attempt)

    # -- sessions -----------------------------------------------------------------------

    @staticmethod
    def _require(conn: sqlite3.Connection, session_id: str) -> None:
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
            raise SessionNotFound(f"no session with id {session_id!r}")

    @staticmethod
    def _check_title(conn: sqlite3.Connection, title: str, session_id: str) -> None:
        if title == "latest":
            raise StoreError("'latest' is reserved for the most recent session; pick another")
        row = conn.execute("SELECT id FROM sessions WHERE title = ?", (title,)).fetchone()
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

        def work(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
                raise SessionExists(f"a session with id {session_id!r} already exists")
            if parent_session_id is not None:
                self._require(conn, parent_session_id)
            if title is not None:
                self._check_title(conn, title, session_id)
            conn.execute(
                "INSERT INTO sessions (id, title, source, model, provider, api_mode, "
                "system_prompt, parent_session_id, cwd, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, title, source, model, provider, api_mode, system_prompt,
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
        usage: dict[str, Any] | None = None,
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
                ("system_prompt", system_prompt),
                ("end_reason", end_reason),
            )
            if v is not None
        }
        if usage is not None:
            fields["usage"] = dumps(usage)
        if ended:
            fields["ended_at"] = now

        def work(conn: sqlite3.Connection) -> None:
            self._require(conn, session_id)
            if "title" in fields:
                self._check_title(conn, fields["title"], session_id)
            fields["updated_at"] = now
            assignments = ", ".join(f"{name} = ?" for name in fields)
            conn.execute(
                f"UPDATE sessions SET {assignments} WHERE id = ?", (*fields.values(), session_id)
            )

        self._write(work)

    def rename(self, session_id: str, title: str | None) -> None:
        clean = (title or "").strip() or None

        def work(conn: sqlite3.Connection) -> None:
            self._require(conn, session_id)
            if clean is not None:
                self._check_title(conn, clean, session_id)
            conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (clean, session_id))

        self._write(work)

    def delete_session(self, session_id: str) -> None:
        def work(conn: sqlite3.Connection) -> None:
            self._require(conn, session_id)
            conn.execute(
                "DELETE FROM messages_fts WHERE rowid IN "
                "(SELECT id FROM messages WHERE session_id = ?)",
                (session_id,),
            )
            conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

        self._write(work)

    def _select_sessions(self, where: str, params: tuple[Any, ...]) -> list[SessionInfo]:
        sql = f"SELECT {_SESSION_COLUMNS} FROM sessions s {where}"
        rows = self._read(lambda c: c.execute(sql, params).fetchall())
        return [session_info(row) for row in rows]

    def list_sessions(
        self, limit: int = 20, offset: int = 0, source: str | None = None
    ) -> list[SessionInfo]:
        where = "WHERE s.source = ?" if source is not None else ""
        params: tuple[Any, ...] = (source,) if source is not None else ()
        return self._select_sessions(
            f"{where} ORDER BY s.updated_at DESC, s.rowid DESC LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )

    def recent(self, limit: int) -> list[SessionInfo]:
        return self._select_sessions(
            "WHERE s.message_count > 0 ORDER BY s.updated_at DESC, s.rowid DESC LIMIT ?",
            (limit,),
        )

    def resolve(self, ref: str) -> str:
        ref = ref.strip()

        def work(conn: sqlite3.Connection) -> str:
            for sql in (
                "SELECT id FROM sessions WHERE id = ?",
                "SELECT id FROM sessions WHERE title = ?",
            ):
                row = conn.execute(sql, (ref,)).fetchone()
                if row is not None:
                    return str(row["id"])
            if ref == "latest":
                row = conn.execute(
                    "SELECT id FROM sessions ORDER BY updated_at DESC, rowid DESC LIMIT 1"
                ).fetchone()
                if row is None:
                    raise SessionNotFound("there are no sessions yet")
                return str(row["id"])
            if len(ref) >= MIN_PREFIX:
                rows = conn.execute(
                    "SELECT id FROM sessions WHERE substr(id, 1, ?) = ? ORDER BY id LIMIT 20",
                    (len(ref), ref),
                ).fetchall()
                if len(rows) == 1:
                    return str(rows[0]["id"])
                if rows:
                    raise AmbiguousSession(ref, [str(r["id"]) for r in rows])
            hint = "" if len(ref) >= MIN_PREFIX else f" (id prefixes need {MIN_PREFIX}+ chars)"
            raise SessionNotFound(f"no session matches {ref!r}{hint}")

        return self._read(work)

    # -- messages -----------------------------------------------------------------------

    def append_messages(
        self,
        session_id: str,
        items: list[tuple[int, dict[str, Any]]],
        *,
        writer: str | None = None,
    ) -> None:
        rows = []
        for seq, message in items:
            if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
                raise StoreError(f"message seq must be a non-negative int, got {seq!r}")
            rows.append((seq, encode_message(message), search_body(message)))
        if not rows:
            return
        now = self._clock()

        def work(conn: sqlite3.Connection) -> None:
            self._require(conn, session_id)
            if writer is not None:
                self._take_lease(conn, session_id, writer, now, renew_only=True)
            inserted = 0
            for seq, row, body in rows:
                cursor = conn.execute(
                    _INSERT_MESSAGE,
                    {"session_id": session_id, "seq": seq, "created_at": now, **row},
                )
                if cursor.rowcount != 1:
                    continue
                inserted += 1
                if body:
                    conn.execute(
                        "INSERT INTO messages_fts (rowid, body) VALUES (?, ?)",
                        (cursor.lastrowid, body),
                    )
            if inserted:
                conn.execute(
                    "UPDATE sessions SET message_count = message_count + ?, updated_at = ? "
                    "WHERE id = ?",
                    (inserted, now, session_id),
                )

        self._write(work)

    # -- the one-writer lease -----------------------------------------------------------

    def claim_writer(self, session_id: str, owner: str, ttl: float = 120.0) -> None:
        now = self._clock()

        def work(conn: sqlite3.Connection) -> None:
            self._require(conn, session_id)
            self._take_lease(conn, session_id, owner, now, ttl=ttl)

        self._write(work)

    def release_writer(self, session_id: str, owner: str) -> None:
        self._write(
            lambda conn: conn.execute(
                "DELETE FROM session_writers WHERE session_id = ? AND owner = ?",
                (session_id, owner),
            )
        )

    def _take_lease(
        self,
        conn: sqlite3.Connection,
        session_id: str,
        owner: str,
        now: float,
        *,
        ttl: float | None = None,
        renew_only: bool = False,
    ) -> None:
        """Inside a write transaction: make `owner` the lease holder or raise SessionBusy.
        `renew_only` (an append) extends a lease it holds and re-takes a free one."""
        row = conn.execute(
            "SELECT owner, expires_at FROM session_writers WHERE session_id = ?", (session_id,)
        ).fetchone()
        held = (row["owner"], row["expires_at"]) if row is not None else None
        expires = lease_expiry(session_id, held, owner, now, ttl=ttl, renew_only=renew_only)
        conn.execute(
            "INSERT INTO session_writers (session_id, owner, expires_at) VALUES (?, ?, ?) "
            "ON CONFLICT(session_id) DO UPDATE SET owner = excluded.owner, "
            "expires_at = excluded.expires_at",
            (session_id, owner, expires),
        )

    def continue_in_child(
        self,
        parent_id: str,
        child_id: str,
        messages: list[dict[str, Any]],
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
        self._write(lambda conn: hand_over(self, parent_id, child_id, messages, **fields))

    def fork_session(self, source_id: str, fork_id: str, *, title: str | None = None) -> None:
        self._write(lambda conn: copy_session(self, source_id, fork_id, title))

    def truncate_messages(self, session_id: str, keep: int) -> int:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            raise StoreError(f"keep must be a non-negative int, got {keep!r}")
        now = self._clock()

        def work(conn: sqlite3.Connection) -> int:
            self._require(conn, session_id)
            where = "WHERE session_id = ? AND seq >= ?"
            conn.execute(
                f"DELETE FROM messages_fts WHERE rowid IN (SELECT id FROM messages {where})",
                (session_id, keep),
            )
            deleted = conn.execute(f"DELETE FROM messages {where}", (session_id, keep)).rowcount
            if deleted:
                conn.execute(
                    "UPDATE sessions SET message_count = message_count - ?, updated_at = ? "
                    "WHERE id = ?",
                    (deleted, now, session_id),
                )
            return int(deleted)

        return self._write(work)

    def load_messages(self, session_id: str) -> list[dict[str, Any]]:
        def work(conn: sqlite3.Connection) -> list[sqlite3.Row]:
            self._require(conn, session_id)
            return conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq",
                (session_id,),
            ).fetchall()

        return [decode_message(row) for row in self._read(work)]

    def message_count(self, session_id: str) -> int:
        def work(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT message_count FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise SessionNotFound(f"no session with id {session_id!r}")
            return int(row["message_count"])

        return self._read(work)

    # -- search -------------------------------------------------------------------------

    def search(
        self, query: str, limit: int = 10, exclude_session: str | None = None
    ) -> list[SearchHit]:
        """Best matches first (bm25, among the newest `RANK_WINDOW` matches). Each hit's
        `context` is the message before it, the message itself and the one after it."""
        expression = fts_query(query)

        def work(conn: sqlite3.Connection) -> list[SearchHit]:
            try:
                cutoff = conn.execute(
                    "SELECT f.rowid FROM messages_fts f JOIN messages m ON m.id = f.rowid "
                    "WHERE messages_fts MATCH ? AND m.session_id IS NOT ? "
                    "ORDER BY f.rowid DESC LIMIT 1 OFFSET ?",
                    (expression, exclude_session, RANK_WINDOW - 1),
                ).fetchone()
                rows = conn.execute(
                    "SELECT m.session_id, s.title, m.seq, m.role, m.created_at, "
                    "snippet(messages_fts, 0, '**', '**', '…', 16) AS snippet "
                    "FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
                    "JOIN sessions s ON s.id = m.session_id "
                    "WHERE messages_fts MATCH ? AND messages_fts.rowid >= ? "
                    "AND m.session_id IS NOT ? ORDER BY messages_fts.rank LIMIT ?",
                    (expression, cutoff[0] if cutoff else 0, exclude_session, max(1, limit)),
                ).fetchall()
            except sqlite3.OperationalError as exc:
                if _is_busy(exc):
                    raise
                raise SearchQueryError(f"cannot search for {query!r}: {exc}") from exc
            return [
                SearchHit(
                    session_id=row["session_id"],
                    session_title=row["title"],
                    message_seq=row["seq"],
                    role=row["role"],
                    snippet=row["snippet"],
                    created_at=row["created_at"],
                    context=_neighbours(conn, row["session_id"], row["seq"]),
                )
                for row in rows
            ]

        return self._read(work)

    # -- usage --------------------------------------------------------------------------

    def record_usage(self, session_id: str, records: list[UsageRecord]) -> None:
        now = self._clock()
        rows = [usage_values(session_id, now, record) for record in records]
        if not rows:
            return

        def work(conn: sqlite3.Connection) -> None:
            self._require(conn, session_id)
            conn.executemany(
                f"INSERT INTO usage_records ({USAGE_COLUMNS}) "
                f"VALUES ({', '.join('?' * len(rows[0]))})",
                rows,
            )

        self._write(work)

    def usage_records(
        self, since: float | None = None, session_id: str | None = None
    ) -> list[UsageRecord]:
        rows = self._read(
            lambda c: c.execute(
                f"SELECT {USAGE_COLUMNS} FROM usage_records "
                "WHERE created_at >= ? AND (? IS NULL OR session_id = ?) ORDER BY created_at, id",
                (since if since is not None else float("-inf"), session_id, session_id),
            ).fetchall()
        )
        return [usage_record(row) for row in rows]

    # -- state --------------------------------------------------------------------------

    def get_state(self, session_id: str, key: str) -> Any:
        row = self._read(
            lambda c: c.execute(
                "SELECT value FROM session_state WHERE session_id = ? AND key = ?",
                (session_id, key),
            ).fetchone()
        )
        return None if row is None else json.loads(row["value"])

    def set_state(self, session_id: str, key: str, value: Any) -> None:
        encoded = dumps(value)
        now = self._clock()

        def work(conn: sqlite3.Connection) -> None:
            self._require(conn, session_id)
            conn.execute(
                "INSERT INTO session_state (session_id, key, value, updated_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (session_id, key) "
                "DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                (session_id, key, encoded, now),
            )

        self._write(work)

    def close(self) -> None:
        """Close the connection (a `shared` store: once its last user closes it)."""
        with _SHARED_LOCK:
            self._users -= 1
            if self._users > 0:
                return
            if self._shared_key is not None and _SHARED.get(self._shared_key) is self:
                del _SHARED[self._shared_key]
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SQLiteSessionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _neighbours(conn: sqlite3.Connection, session_id: str, seq: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        f"SELECT * FROM ("
        f" SELECT seq, {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND seq < ?"
        f" ORDER BY seq DESC LIMIT 1) "
        f"UNION ALL SELECT * FROM ("
        f" SELECT seq, {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND seq >= ?"
        f" ORDER BY seq LIMIT 2)",
        (session_id, seq, session_id, seq),
    ).fetchall()
    return [decode_message(row) for row in sorted(rows, key=lambda r: r["seq"])]
