"""The SQLite store's full-text index, brought up to date behind the appends.

Indexing each message in its append's transaction wrote about half of that commit's pages
(an FTS5 segment, its structure record, the document size and the content row), and an
append commits on the event loop's thread at every step. So an append only adds rows, and
`index_pending` indexes every message past the recorded high-water mark in one transaction:
before a search, every `CHECKPOINT_EVERY` commits on the io lane, and when the store closes.
A batch writes one segment for all its messages, so the index costs less in all, too.

Message ids only grow (the table is AUTOINCREMENT), so the mark is exact across processes: a
message truncated away before it was indexed is never indexed, and one that another process
appended is indexed by whichever process searches or maintains the file first.
"""

from __future__ import annotations

import sqlite3

from talaria.store.schema import MESSAGE_COLUMNS, decode_message, search_body

_PROGRESS = "SELECT indexed_upto, (SELECT COALESCE(MAX(id), 0) FROM messages) FROM search_progress"


def has_pending(conn: sqlite3.Connection) -> bool:
    """Whether some message is not in the index yet (a read)."""
    indexed, newest = conn.execute(_PROGRESS).fetchone()
    return bool(newest > indexed)


def index_pending(conn: sqlite3.Connection) -> int:
    """In a write transaction: index every message past the mark, move the mark; how many
    messages were looked at."""
    indexed, newest = conn.execute(_PROGRESS).fetchone()
    if newest <= indexed:
        return 0
    rows = conn.execute(
        f"SELECT id, {MESSAGE_COLUMNS} FROM messages WHERE id > ? AND id <= ? ORDER BY id",
        (indexed, newest),
    ).fetchall()
    bodies = ((row["id"], search_body(decode_message(row))) for row in rows)
    conn.executemany(
        "INSERT INTO messages_fts (rowid, body) VALUES (?, ?)",
        [(rowid, body) for rowid, body in bodies if body],
    )
    conn.execute("UPDATE search_progress SET indexed_upto = ?", (newest,))
    return len(rows)
