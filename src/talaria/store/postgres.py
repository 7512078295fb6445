"""The PostgreSQL session store: many processes and hosts on one database (`talaria[postgres]`).

Selected with `store.url: postgresql://...`. Each process keeps one connection pool per URL,
shared by every agent (and every store object) that uses that URL; the pools close at exit.
Every write is one transaction that has committed when the method returns. Full-text search
uses a tsvector column with a GIN index; the query rules are the same as SQLite's.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from talaria.store.base import SearchHit, StoreError, TitleInUse
from talaria.store.pg_schema import TEXT_SEARCH_CONFIG, migrate, tsquery
from talaria.store.query import index_words
from talaria.store.schema import MESSAGE_COLUMNS, dumps, encode_message, search_body
from talaria.store.sql_base import (
    RANK_WINDOW,
    Conn,
    Dialect,
    SqlSessionStore,
    check_keep,
    message_rows,
)

T = TypeVar("T")
_COLUMN_NAMES = [name.strip() for name in MESSAGE_COLUMNS.split(",")]
_INSERT_MESSAGE = (
    f"INSERT INTO messages (session_id, seq, created_at, body, tsv, {MESSAGE_COLUMNS}) "
    f"VALUES (%(session_id)s, %(seq)s, %(created_at)s, %(body)s, "
    f"to_tsvector('{TEXT_SEARCH_CONFIG}', %(words)s), "
    f"{', '.join(f'%({name})s' for name in _COLUMN_NAMES)}) "
    f"ON CONFLICT (session_id, seq) DO NOTHING"
)
_HEADLINE = "StartSel=**, StopSel=**, MaxWords=16, MinWords=6, ShortWord=2"


class PostgresSessionStore(SqlSessionStore):
    """`SessionStore` over a PostgreSQL database; safe to share between threads and hosts."""

    dialect = Dialect(mark="%s", order="ordinal", lock=" FOR UPDATE")

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

    def _read(self, work: Callable[[Conn], T]) -> T:
        with self._transaction() as conn:
            return work(conn)

    _write = _read

    @staticmethod
    def _text(value: str | None) -> str | None:
        return _text(value)

    # -- sessions -----------------------------------------------------------------------

    def delete_session(self, session_id: str) -> None:
        with self._transaction() as conn:
            self._require(conn, session_id)
            conn.execute("DELETE FROM sessions WHERE id = %s", (session_id,))

    # -- messages -----------------------------------------------------------------------

    def append_messages(
        self,
        session_id: str,
        items: Sequence[tuple[int, Mapping[str, Any]]],
        *,
        writer: str | None = None,
    ) -> None:
        rows = []
        for seq, message in message_rows(items):
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
            self._count_messages(conn, session_id, inserted, now)

    def truncate_messages(self, session_id: str, keep: int) -> int:
        check_keep(keep)
        with self._transaction() as conn:
            self._require(conn, session_id, lock=True)
            deleted = conn.execute(
                "DELETE FROM messages WHERE session_id = %s AND seq >= %s", (session_id, keep)
            ).rowcount
            self._count_messages(conn, session_id, -deleted, self._clock())
        return int(deleted)

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
            return self._hits(conn, rows)

    def close(self) -> None:
        """The pool is shared by the whole process; it closes at exit (or `close_pools`)."""


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


def _pg_row(message: Mapping[str, Any]) -> dict[str, Any]:
    """`encode_message`, with NUL-bearing string content stored as JSON so it round-trips."""
    row = encode_message(message)
    if isinstance(row["content"], str) and not row["content_is_json"] and "\x00" in row["content"]:
        row["content"], row["content_is_json"] = dumps(row["content"]), 1
    for name in ("tool_call_id", "name", "reasoning"):
        row[name] = _text(row[name])
    return row
