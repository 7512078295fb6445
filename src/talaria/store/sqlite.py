"""The SQLite session store: one file, many processes, crash-safe appends, full-text search.

Durability comes from WAL + one `BEGIN IMMEDIATE` transaction per write that has committed
before the method returns, so a `kill -9` at any moment leaves a database that opens and whose
sessions load. Appends insert only the new rows (cost independent of history length).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from talaria.store.base import (
    SearchHit,
    SearchQueryError,
    StoreCorrupt,
    StoreError,
    StoreLocked,
    StoreUnwritable,
)
from talaria.store.schema import (
    MESSAGE_COLUMNS,
    MIGRATIONS,
    SCHEMA_VERSION,
    encode_message,
    fts_query,
)
from talaria.store.search_index import has_pending, index_pending
from talaria.store.sql_base import (
    RANK_WINDOW,
    Dialect,
    SqlSessionStore,
    check_keep,
    message_rows,
)
from talaria.store.sqlite_check import file_identity, first_problem, odd_pages, read_only_uri

T = TypeVar("T")

_INSERT_MESSAGE = (  # INSERT OR IGNORE: re-appending a stored seq is a no-op
    f"INSERT OR IGNORE INTO messages (session_id, seq, created_at, {MESSAGE_COLUMNS}) "
    f"VALUES (:session_id, :seq, :created_at, "
    f"{', '.join(':' + name.strip() for name in MESSAGE_COLUMNS.split(','))})"
)
_Row = tuple[int, dict[str, Any]]
"""(seq, column values) of one message."""
_SHARED: dict[tuple[int, str], SQLiteSessionStore] = {}
_SHARED_LOCK = threading.Lock()


LOCK_POLL = 0.5
"""Longest single wait inside SQLite's busy handler; the store retries until its own limit."""
INLINE_LIMIT = 64 * 1024
"""Largest append (characters of encoded rows) that `try_append_messages` commits in place."""
INLINE_SLOW = 0.02
"""In-place commits that take longer, `INLINE_STRIKES` in a row (a slow or network disk, not a
busy moment), stop them for this store."""
INLINE_STRIKES = 3
CHECKPOINT_EVERY = 100
"""Commits between maintenance runs (the search index brought up to date, then a WAL
checkpoint). SQLite's own checkpoint (every 1,000 pages, with two fsyncs) is off, so that a
commit on the event loop's thread never runs one; they run on the io lane instead."""


def _is_busy(exc: sqlite3.Error) -> bool:
    message = str(exc).lower()
    return "locked" in message or "busy" in message


_CORRUPT = ("not a database", "malformed", "corrupt")
_UNWRITABLE = ("readonly", "read-only", "unable to open", "disk is full", "disk i/o", "permission")


def damaged(path: str, detail: str) -> StoreCorrupt:
    return StoreCorrupt(
        f"session database {path} is damaged ({detail}); talaria left it unchanged. "
        f"Move it aside to start afresh: mv {path} {path}.corrupt "
        f"(sqlite3 {path}.corrupt .recover can often rescue its sessions)"
    )


def storage_fault(path: str, exc: BaseException) -> StoreError:
    """One clear error for a database that cannot be used: what is wrong, what to do."""
    detail = str(exc) or type(exc).__name__
    text = detail.lower()
    if any(marker in text for marker in _CORRUPT):
        return damaged(path, detail)
    if "full" in text or "i/o" in text or getattr(exc, "errno", None) == 28:
        return StoreUnwritable(
            f"session database {path} cannot be written ({detail}): is the disk full? "
            "Free some space and try again"
        )
    if isinstance(exc, OSError) or any(marker in text for marker in _UNWRITABLE):
        return StoreUnwritable(
            f"session database {path} cannot be written ({detail}): make its directory "
            "writable, or point TALARIA_HOME at a writable directory"
        )
    return StoreError(f"session database {path}: {detail}")


class SQLiteSessionStore(SqlSessionStore):
    """`SessionStore` over one SQLite file; safe to share between threads and processes."""

    dialect = Dialect(mark="?", order="rowid", lock="")

    def __init__(
        self,
        path: str | Path,
        *,
        lock_timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = str(path)
        self.lock_timeout = lock_timeout
        """Seconds one operation waits for another process's lock before `StoreLocked`."""
        self._clock = clock
        self._locked_out = False
        self._lock = threading.RLock()
        self._users = 1
        self._shared_key: tuple[int, str] | None = None
        self._tx_thread: int | None = None
        self._busy_ms = int(min(lock_timeout, LOCK_POLL) * 1000)
        self._inline = type(self).append_messages is SQLiteSessionStore.append_messages
        """A subclass that changes `append_messages` gets every append through it."""
        self._slow = 0
        self._commits = 0
        self._damage: StoreCorrupt | None = None
        """Why this database must not be written (found when it was opened)."""
        on_disk = self.path != ":memory:"
        try:
            if on_disk:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                problem = first_problem(self.path) if odd_pages(self.path) else None
                self._damage = damaged(self.path, problem) if problem else None
            self._conn = sqlite3.connect(
                read_only_uri(self.path) if self._damage else self.path,
                timeout=self._busy_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
                uri=self._damage is not None,
            )
        except (sqlite3.Error, OSError) as exc:
            raise storage_fault(self.path, exc) from None
        self._conn.row_factory = sqlite3.Row
        self._identity = file_identity(self.path) if on_disk else None
        """The file this connection opened (a write checks it is still there)."""
        try:
            if self._damage is None:  # a damaged one is only read, as it is
                self._read(self._configure)
                self._migrate()
        except StoreError:
            self._conn.close()
            raise

    @classmethod
    def shared(cls, path: str | Path, lock_timeout: float = 10.0) -> SQLiteSessionStore:
        """The process's store for the file at `path`, one connection for every agent that
        uses it (a connection holds about 250 KB of caches). Each call needs its `close`."""
        key = (os.getpid(), str(Path(path).resolve()))  # a forked child opens its own
        with _SHARED_LOCK:
            store = _SHARED.get(key)
            if store is not None:
                store._users += 1
                return store
            store = cls(path, lock_timeout=lock_timeout)
            store._shared_key = key
            _SHARED[key] = store
            return store

    @staticmethod
    def _configure(conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA wal_autocheckpoint = 0")  # see CHECKPOINT_EVERY

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
        """Run one attempt; on SQLITE_BUSY/locked back off with jitter and try again, until
        `lock_timeout` has passed. After that, each operation tries once (a short wait) until
        one succeeds, so a turn that meets a held lock waits for it once, not at every save."""
        deadline = time.monotonic() + (0.0 if self._locked_out else self.lock_timeout)
        attempt = 0
        while True:
            try:
                result = attempt_once()
                self._locked_out = False
                return result
            except sqlite3.OperationalError as exc:
                attempt += 1
                if not _is_busy(exc):
                    raise storage_fault(self.path, exc) from None
                left = deadline - time.monotonic()
                if left <= 0:
                    self._locked_out = True
                    raise StoreLocked(
                        f"session database {self.path} stayed locked for "
                        f"{self.lock_timeout:g} s (store.lock_timeout): another process "
                        f"{lock_holders(self.path)}is writing to it"
                    ) from None
                time.sleep(min(left, 0.02 * 2 ** min(attempt, 5) * _jitter()))
            except sqlite3.Error as exc:
                raise storage_fault(self.path, exc) from None

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
                result = self._transaction(work)
            self._after_commit(on_lane=True)
            return result

        return self._retrying(attempt)

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Under `_lock`: `work` in one `BEGIN IMMEDIATE` transaction, committed."""
        self.check_writable()
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

    def check_writable(self) -> None:
        """Raise why nothing may be written: the database is damaged, or its file was
        deleted or replaced since it was opened (what this connection wrote would be in a
        file no one opens again, and the user told the turn went fine)."""
        if self._damage is not None:
            raise self._damage
        if self._identity is not None and file_identity(self.path) != self._identity:
            raise StoreUnwritable(
                f"session database {self.path} was deleted or replaced while talaria was "
                "running, so nothing more can be saved to it: restore it, or start talaria "
                "again to begin a new one"
            )

    def _after_commit(self, *, on_lane: bool) -> None:
        self._commits += 1
        if self._commits % CHECKPOINT_EVERY:
            return
        if on_lane:
            self._maintain()
        else:
            from talaria.offload import lane

            lane("io").start(self._maintain, _ignore)

    def _maintain(self) -> None:
        """Index the messages appended since the last run, then copy the WAL into the
        database without waiting for readers (PASSIVE). A busy database or another
        process's open transaction only postpones either to the next run."""
        with self._lock:
            with contextlib.suppress(sqlite3.Error, StoreError):
                self._transaction(index_pending)
            with contextlib.suppress(sqlite3.Error, StoreError):
                self.check_writable()
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _try_now(self, work: Callable[[sqlite3.Connection], None]) -> bool:
        """Commit `work` on the calling thread if that cannot wait: False, with nothing
        written, when another thread of this process or another process is writing."""
        if not self._lock.acquire(blocking=False):
            return False
        started = time.monotonic()
        try:
            if not self._unless_busy(work):
                return False
        finally:
            self._lock.release()
        self._slow = self._slow + 1 if time.monotonic() - started > INLINE_SLOW else 0
        if self._slow >= INLINE_STRIKES:
            self._inline = False
        self._locked_out = False
        self._after_commit(on_lane=False)
        return True

    def _unless_busy(self, work: Callable[[sqlite3.Connection], object]) -> bool:
        """Under `_lock`: `work` in a transaction if no other process holds the database;
        False, with nothing written, if one does."""
        try:
            self._conn.execute("PRAGMA busy_timeout = 0")
            try:
                self._transaction(work)
            finally:
                self._conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                return False
            raise storage_fault(self.path, exc) from None
        except sqlite3.Error as exc:
            raise storage_fault(self.path, exc) from None
        return True

    # -- sessions -----------------------------------------------------------------------

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

    # -- messages -----------------------------------------------------------------------

    def append_messages(
        self,
        session_id: str,
        items: Sequence[tuple[int, Mapping[str, Any]]],
        *,
        writer: str | None = None,
    ) -> None:
        rows = _rows(items)
        if rows:
            self._write(self._appending(session_id, rows, writer))

    def try_append_messages(
        self,
        session_id: str,
        items: Sequence[tuple[int, Mapping[str, Any]]],
        *,
        writer: str | None = None,
    ) -> bool:
        """`append_messages` on the caller's thread (the event loop's: no thread hop per
        step) when it cannot block: False, with nothing written, when the database is busy,
        the rows are large, or this store's disk proved slow; then use `append_messages`."""
        if not self._inline:
            return False
        rows = _rows(items)
        if not rows:
            return True
        if _size(rows) > INLINE_LIMIT:
            return False
        return self._try_now(self._appending(session_id, rows, writer))

    def _appending(
        self, session_id: str, rows: list[_Row], writer: str | None
    ) -> Callable[[sqlite3.Connection], None]:
        """The transaction that appends `rows`."""
        now = self._clock()

        def work(conn: sqlite3.Connection) -> None:
            self._require(conn, session_id)
            if writer is not None:
                self._take_lease(conn, session_id, writer, renew_only=True)
            inserted = conn.executemany(  # the search index follows (store/search_index.py)
                _INSERT_MESSAGE,
                [
                    {"session_id": session_id, "seq": seq, "created_at": now, **row}
                    for seq, row in rows
                ],
            ).rowcount
            self._count_messages(conn, session_id, inserted, now)

        return work

    def truncate_messages(self, session_id: str, keep: int) -> int:
        check_keep(keep)
        now = self._clock()

        def work(conn: sqlite3.Connection) -> int:
            self._require(conn, session_id)
            where = "WHERE session_id = ? AND seq >= ?"
            conn.execute(
                f"DELETE FROM messages_fts WHERE rowid IN (SELECT id FROM messages {where})",
                (session_id, keep),
            )
            deleted = conn.execute(f"DELETE FROM messages {where}", (session_id, keep)).rowcount
            self._count_messages(conn, session_id, -deleted, now)
            return int(deleted)

        return self._write(work)

    # -- search -------------------------------------------------------------------------

    def search(
        self, query: str, limit: int = 10, exclude_session: str | None = None
    ) -> list[SearchHit]:
        """Best matches first (bm25, among the newest `RANK_WINDOW` matches). Each hit's
        `context` is the message before it, the message itself and the one after it."""
        expression = fts_query(query)
        if self._read(has_pending):
            # another process writing, or a file this process may only read: search what is
            # indexed rather than wait or fail
            with self._lock, contextlib.suppress(StoreError):
                self._unless_busy(index_pending)

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
            return self._hits(conn, rows)

        return self._read(work)

    def close(self) -> None:
        """Close the connection (a `shared` store: once its last user closes it)."""
        with _SHARED_LOCK:
            self._users -= 1
            if self._users > 0:
                return
            if self._shared_key is not None and _SHARED.get(self._shared_key) is self:
                del _SHARED[self._shared_key]
        with self._lock, contextlib.suppress(sqlite3.Error):
            with contextlib.suppress(sqlite3.Error, StoreError):  # the next opener indexes
                self._transaction(index_pending)  # what is left
            self._conn.close()


def _rows(items: Sequence[tuple[int, Mapping[str, Any]]]) -> list[_Row]:
    return [(seq, encode_message(m)) for seq, m in message_rows(items)]


def _size(rows: list[_Row]) -> int:
    """Characters of text in `rows`: what the commit writes, roughly."""
    return sum(len(value) for _, row in rows for value in row.values() if isinstance(value, str))


def _jitter() -> float:
    """A factor in [0.5, 1.5); `random` is imported only when a lock is met."""
    import random

    return random.uniform(0.5, 1.5)


def _ignore(result: object, error: BaseException | None) -> None:
    """A background maintenance run's outcome: nobody waits for it (`_maintain` swallows its
    SQLite errors; the next run tries again)."""


def lock_holders(path: str) -> str:
    """'(pid 123 python3) ' for the other processes of this user that have the file open."""
    if not os.path.isdir("/proc"):
        return ""
    target = os.path.realpath(path)
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{entry}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry}/fd/{fd}") == target:
                        with open(f"/proc/{entry}/comm", encoding="utf-8") as comm:
                            found.append(f"pid {entry} {comm.read().strip()}")
                        break
    return f"({', '.join(found)}) " if found else ""
