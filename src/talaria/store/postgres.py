"""The PostgreSQL session store: many processes and hosts on one database (`talaria[postgres]`).

Selected with `store.url: postgresql://...`. Each process keeps one connection pool per URL,
shared by every agent (and every store object) that uses that URL; the pools close at exit.
Every write is one transaction that has committed when the method returns. Full-text search
uses a tsvector column with a GIN index; the query rules are the same as SQLite's.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from talaria.store.base import (
    AmbiguousSession,
    SearchHit,
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
from talaria.store.pg_schema import TEXT_SEARCH_CONFIG, migrate, tsquery
from talaria.store.query import index_words
from talaria.store.schema import (
    MESSAGE_COLUMNS,
    USAGE_COLUMNS,
    decode_message,
    dumps,
    encode_message,
    search_body,
    session_info,
    usage_record,
    usage_values,
)

MIN_PREFIX = 6
RANK_WINDOW = 2000
"""Search ranks among at most this many of the newest matches (as the SQLite store does)."""
_COLUMN_NAMES = [name.strip() for name in MESSAGE_COLUMNS.split(",")]
_INSERT_MESSAGE = (
    f"INSERT INTO messages (session_id, seq, created_at, body, tsv, {MESSAGE_COLUMNS}) "
    f"VALUES (%(session_id)s, %(seq)s, %(created_at)s, %(body)s, "
    f"to_tsvector('{TEXT_SEARCH_CONFIG}', %(words)s), "
    f"{', '.join(f'%({name})s' for name in _COLUMN_NAMES)}) "
    f"ON CONFLICT (session_id, seq) DO NOTHING"
)
_PREVIEW = (
    "(SELECT {col} FROM messages p WHERE p.session_id = s.id AND p.role = 'user' "
    "ORDER BY p.seq LIMIT 1)"
)
_SESSION_COLUMNS = (
    "s.id, s.title, s.source, s.model, s.provider, s.api_mode, s.system_prompt, "
    "s.parent_session_id, s.cwd, s.created_at, s.updated_at, s.ended_at, s.end_reason, "
    f"s.message_count, s.usage, {_PREVIEW.format(col='content')} AS preview, "
    f"{_PREVIEW.format(col='content_is_json')} AS preview_is_json"
)
_HEADLINE = "StartSel=**, StopSel=**, MaxWords=16, MinWords=6, ShortWord=2"


class PostgresSessionStore:
    """`SessionStore` over a PostgreSQL database; safe to share between threads and hosts."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        connect_timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = url
        self.where = redact(url)
        self._clock = clock
        self._pool = shared_pool(url, pool_size, connect_timeout)
        self._local = threading.local()

    # -- transactions -------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction on a pooled connection; database errors become `StoreError`s.
        Inside another one on this thread it is a savepoint of that one, so a compound
        operation (`continue_in_child`) commits as a whole or not at all."""
        current: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if current is not None:
            with current.transaction():
                yield current
            return
        try:
            with self._pool.connection() as conn, conn.transaction():
                self._local.conn = conn
                try:
                    yield conn
                finally:
                    self._local.conn = None
        except StoreError:
            raise
        except psycopg.errors.UniqueViolation as exc:
            raise TitleInUse(f"that title is already used by another session ({exc})") from exc
        except psycopg.Error as exc:
            raise StoreError(f"session database error ({self.where}): {exc}") from exc
        except Exception as exc:  # the pool's own timeouts
            if type(exc).__module__.startswith("psycopg_pool"):
                raise StoreError(f"session database {self.where} unavailable: {exc}") from exc
            raise

    # -- sessions -----------------------------------------------------------------------

    @staticmethod
    def _require(conn: psycopg.Connection[Any], session_id: str, *, lock: bool = False) -> None:
        sql = "SELECT 1 FROM sessions WHERE id = %s" + (" FOR UPDATE" if lock else "")
        if conn.execute(sql, (session_id,)).fetchone() is None:
            raise SessionNotFound(f"no session with id {session_id!r}")

    @staticmethod
    def _check_title(conn: psycopg.Connection[Any], title: str, session_id: str) -> None:
        if title == "latest":
            raise StoreError("'latest' is reserved for the most recent session; pick another")
        row = conn.execute("SELECT id FROM sessions WHERE title = %s", (title,)).fetchone()
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
        with self._transaction() as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = %s", (session_id,)).fetchone():
                raise SessionExists(f"a session with id {session_id!r} already exists")
            if parent_session_id is not None:
                self._require(conn, parent_session_id)
            if title is not None:
                self._check_title(conn, title, session_id)
            conn.execute(
                "INSERT INTO sessions (id, title, source, model, provider, api_mode, "
                "system_prompt, parent_session_id, cwd, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (session_id, title, source, model, provider, api_mode, _text(system_prompt),
                 parent_session_id, cwd, now, now),
            )  # fmt: skip

    def get_session(self, session_id: str) -> SessionInfo | None:
        rows = self._select_sessions("WHERE s.id = %s", (session_id,))
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
                ("system_prompt", _text(system_prompt)),
                ("end_reason", end_reason),
            )
            if v is not None
        }
        if usage is not None:
            fields["usage"] = dumps(usage)
        if ended:
            fields["ended_at"] = now
        fields["updated_at"] = now
        with self._transaction() as conn:
            self._require(conn, session_id)
            if "title" in fields:
                self._check_title(conn, fields["title"], session_id)
            assignments = ", ".join(f"{name} = %s" for name in fields)
            conn.execute(
                f"UPDATE sessions SET {assignments} WHERE id = %s", (*fields.values(), session_id)
            )

    def rename(self, session_id: str, title: str | None) -> None:
        clean = (title or "").strip() or None
        with self._transaction() as conn:
            self._require(conn, session_id)
            if clean is not None:
                self._check_title(conn, clean, session_id)
            conn.execute("UPDATE sessions SET title = %s WHERE id = %s", (clean, session_id))

    def delete_session(self, session_id: str) -> None:
        with self._transaction() as conn:
            self._require(conn, session_id)
            conn.execute("DELETE FROM sessions WHERE id = %s", (session_id,))

    def _select_sessions(self, where: str, params: tuple[Any, ...]) -> list[SessionInfo]:
        with self._transaction() as conn:
            rows = conn.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions s {where}", params)
            return [session_info(row) for row in rows.fetchall()]

    def list_sessions(
        self, limit: int = 20, offset: int = 0, source: str | None = None
    ) -> list[SessionInfo]:
        where = "WHERE s.source = %s" if source is not None else ""
        params: tuple[Any, ...] = (source,) if source is not None else ()
        return self._select_sessions(
            f"{where} ORDER BY s.updated_at DESC, s.ordinal DESC LIMIT %s OFFSET %s",
            (*params, limit, offset),
        )

    def recent(self, limit: int) -> list[SessionInfo]:
        return self._select_sessions(
            "WHERE s.message_count > 0 ORDER BY s.updated_at DESC, s.ordinal DESC LIMIT %s",
            (limit,),
        )

    def resolve(self, ref: str) -> str:
        ref = ref.strip()
        with self._transaction() as conn:
            for column in ("id", "title"):
                row = conn.execute(f"SELECT id FROM sessions WHERE {column} = %s", (ref,))
                found = row.fetchone()
                if found is not None:
                    return str(found["id"])
            if ref == "latest":
                found = conn.execute(
                    "SELECT id FROM sessions ORDER BY updated_at DESC, ordinal DESC LIMIT 1"
                ).fetchone()
                if found is None:
                    raise SessionNotFound("there are no sessions yet")
                return str(found["id"])
            if len(ref) >= MIN_PREFIX:
                rows = conn.execute(
                    "SELECT id FROM sessions WHERE left(id, %s) = %s ORDER BY id LIMIT 20",
                    (len(ref), ref),
                ).fetchall()
                if len(rows) == 1:
                    return str(rows[0]["id"])
                if rows:
                    raise AmbiguousSession(ref, [str(r["id"]) for r in rows])
        hint = "" if len(ref) >= MIN_PREFIX else f" (id prefixes need {MIN_PREFIX}+ chars)"
        raise SessionNotFound(f"no session matches {ref!r}{hint}")

    # -- the writer lease ---------------------------------------------------------------

    def claim_writer(self, session_id: str, owner: str, ttl: float = 120.0) -> None:
        with self._transaction() as conn:
            self._require(conn, session_id)
            self._take_lease(conn, session_id, owner, ttl=ttl)

    def release_writer(self, session_id: str, owner: str) -> None:
        with self._transaction() as conn:
            conn.execute(
                "DELETE FROM session_writers WHERE session_id = %s AND owner = %s",
                (session_id, owner),
            )

    def _take_lease(
        self,
        conn: psycopg.Connection[Any],
        session_id: str,
        owner: str,
        *,
        ttl: float | None = None,
        renew_only: bool = False,
    ) -> None:
        """In the caller's transaction: make `owner` the lease holder or raise SessionBusy."""
        row = conn.execute(
            "SELECT owner, expires_at FROM session_writers WHERE session_id = %s FOR UPDATE",
            (session_id,),
        ).fetchone()
        held = (row["owner"], row["expires_at"]) if row is not None else None
        now = self._clock()
        expires = lease_expiry(session_id, held, owner, now, ttl=ttl, renew_only=renew_only)
        conn.execute(
            "INSERT INTO session_writers (session_id, owner, expires_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, "
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
        with self._transaction():
            hand_over(self, parent_id, child_id, messages, **fields)

    def fork_session(self, source_id: str, fork_id: str, *, title: str | None = None) -> None:
        with self._transaction():
            copy_session(self, source_id, fork_id, title)

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
            body = search_body(message)
            rows.append({"seq": seq, "body": body, "words": index_words(body), **_pg_row(message)})
        if not rows:
            return
        now = self._clock()
        with self._transaction() as conn:
            self._require(conn, session_id, lock=True)
            if writer is not None:
                self._take_lease(conn, session_id, writer, renew_only=True)
            inserted = 0
            for row in rows:
                cursor = conn.execute(
                    _INSERT_MESSAGE, {"session_id": session_id, "created_at": now, **row}
                )
                inserted += cursor.rowcount
            if inserted:
                conn.execute(
                    "UPDATE sessions SET message_count = message_count + %s, updated_at = %s "
                    "WHERE id = %s",
                    (inserted, now, session_id),
                )

    def truncate_messages(self, session_id: str, keep: int) -> int:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            raise StoreError(f"keep must be a non-negative int, got {keep!r}")
        with self._transaction() as conn:
            self._require(conn, session_id, lock=True)
            deleted = conn.execute(
                "DELETE FROM messages WHERE session_id = %s AND seq >= %s", (session_id, keep)
            ).rowcount
            if deleted:
                conn.execute(
                    "UPDATE sessions SET message_count = message_count - %s, updated_at = %s "
                    "WHERE id = %s",
                    (deleted, self._clock(), session_id),
                )
        return int(deleted)

    def load_messages(self, session_id: str) -> list[dict[str, Any]]:
        with self._transaction() as conn:
            self._require(conn, session_id)
            rows = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = %s ORDER BY seq",
                (session_id,),
            ).fetchall()
        return [decode_message(row) for row in rows]

    def message_count(self, session_id: str) -> int:
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT message_count FROM sessions WHERE id = %s", (session_id,)
            ).fetchone()
        if row is None:
            raise SessionNotFound(f"no session with id {session_id!r}")
        return int(row["message_count"])

    # -- search -------------------------------------------------------------------------

    def search(
        self, query: str, limit: int = 10, exclude_session: str | None = None
    ) -> list[SearchHit]:
        """Best matches first (ts_rank among the newest `RANK_WINDOW` matches); each hit's
        `context` is the message before it, the message itself and the one after it."""
        expression = tsquery(query)
        with self._transaction() as conn:
            rows = conn.execute(
                "WITH q AS (SELECT to_tsquery(%(cfg)s, %(expr)s) AS q), "
                "newest AS (SELECT m.* FROM messages m, q WHERE m.tsv @@ q.q "
                " AND m.session_id IS DISTINCT FROM %(exclude)s ORDER BY m.id DESC LIMIT %(win)s) "
                "SELECT n.session_id, s.title, n.seq, n.role, n.created_at, "
                " ts_headline(%(cfg)s, n.body, q.q, %(headline)s) AS snippet "
                "FROM newest n JOIN sessions s ON s.id = n.session_id, q "
                "ORDER BY ts_rank(n.tsv, q.q) DESC, n.id DESC LIMIT %(limit)s",
                {
                    "cfg": TEXT_SEARCH_CONFIG,
                    "expr": expression,
                    "exclude": exclude_session,
                    "win": RANK_WINDOW,
                    "headline": _HEADLINE,
                    "limit": max(1, limit),
                },
            ).fetchall()
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

    # -- usage records --------------------------------------------------------------------

    def record_usage(self, session_id: str, records: list[UsageRecord]) -> None:
        now = self._clock()
        rows = [usage_values(session_id, now, record) for record in records]
        if not rows:
            return
        placeholders = ", ".join(["%s"] * len(rows[0]))
        with self._transaction() as conn:
            self._require(conn, session_id)
            conn.cursor().executemany(
                f"INSERT INTO usage_records ({USAGE_COLUMNS}) VALUES ({placeholders})", rows
            )

    def usage_records(
        self, since: float | None = None, session_id: str | None = None
    ) -> list[UsageRecord]:
        with self._transaction() as conn:
            rows = conn.execute(
                f"SELECT {USAGE_COLUMNS} FROM usage_records WHERE created_at >= %s "
                "AND (%s::text IS NULL OR session_id = %s) ORDER BY created_at, id",
                (since if since is not None else float("-inf"), session_id, session_id),
            ).fetchall()
        return [usage_record(row) for row in rows]

    # -- state --------------------------------------------------------------------------

    def get_state(self, session_id: str, key: str) -> Any:
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT value FROM session_state WHERE session_id = %s AND key = %s",
                (session_id, key),
            ).fetchone()
        return None if row is None else json.loads(row["value"])

    def set_state(self, session_id: str, key: str, value: Any) -> None:
        encoded = dumps(value)
        with self._transaction() as conn:
            self._require(conn, session_id)
            conn.execute(
                "INSERT INTO session_state (session_id, key, value, updated_at) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (session_id, key) "
                "DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                (session_id, key, encoded, self._clock()),
            )

    def close(self) -> None:
        """The pool is shared by the whole process; it closes at exit (or `close_pools`)."""

    def __enter__(self) -> PostgresSessionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# -- the process-wide pools ----------------------------------------------------------------

_POOLS: dict[tuple[int, str], ConnectionPool[Any]] = {}
_POOLS_LOCK = threading.Lock()


def shared_pool(url: str, size: int = 10, connect_timeout: float = 10.0) -> ConnectionPool[Any]:
    """The process's pool for `url`, opened (and the schema migrated) on first use."""
    key = (os.getpid(), url)  # a forked child must not reuse its parent's connections
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None or pool.closed:
            pool = _open_pool(url, size, connect_timeout)
            _POOLS[key] = pool
        return pool


def _open_pool(url: str, size: int, connect_timeout: float) -> ConnectionPool[Any]:
    where = redact(url)
    try:  # one direct connection first: its error says why (the pool's only says "timeout")
        with psycopg.connect(
            url, autocommit=True, row_factory=dict_row, connect_timeout=int(connect_timeout)
        ) as conn:
            migrate(conn, where)
    except psycopg.Error as exc:
        raise StoreError(f"cannot use the session database {where}: {exc}".strip()) from exc
    pool: ConnectionPool[Any] = ConnectionPool(
        url,
        min_size=1,
        max_size=max(1, size),
        kwargs={"autocommit": True, "row_factory": dict_row},
        open=False,
        name=f"talaria:{where}",
    )
    pool.open(wait=True, timeout=connect_timeout)
    return pool


def close_pools() -> None:
    """Close every pool this process opened (at exit; tests call it between databases)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.close()


atexit.register(close_pools)


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


# -- rows ----------------------------------------------------------------------------------


def _text(value: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL; outside message content it becomes U+FFFD."""
    return value.replace("\x00", "\ufffd") if value is not None else None


def _pg_row(message: dict[str, Any]) -> dict[str, Any]:
    """`encode_message`, with NUL-bearing string content stored as JSON so it round-trips."""
    row = encode_message(message)
    if isinstance(row["content"], str) and not row["content_is_json"] and "\x00" in row["content"]:
        row["content"], row["content_is_json"] = dumps(row["content"]), 1
    for name in ("tool_call_id", "name", "reasoning"):
        row[name] = _text(row[name])
    return row


def _neighbours(conn: psycopg.Connection[Any], session_id: str, seq: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        f"(SELECT seq, {MESSAGE_COLUMNS} FROM messages WHERE session_id = %s AND seq < %s "
        f" ORDER BY seq DESC LIMIT 1) UNION ALL "
        f"(SELECT seq, {MESSAGE_COLUMNS} FROM messages WHERE session_id = %s AND seq >= %s "
        f" ORDER BY seq LIMIT 2)",
        (session_id, seq, session_id, seq),
    ).fetchall()
    return [decode_message(row) for row in sorted(rows, key=lambda r: r["seq"])]
