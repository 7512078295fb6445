"""The cheap check a SQLite session database gets when it is opened: is every page's first
byte one a page of this database can start with?

In SQLite's file format a page is a b-tree page (its first
byte is 2, 5, 10 or 13), an overflow or freelist page (its first four bytes are a page number
or 0, and no talaria database has 2^24 pages, so its first byte is 0), or the lock-byte page
of a database over 1 GiB (skipped). A database with auto-vacuum also has pointer-map pages,
which this check does not know: it is skipped for those (talaria never turns auto-vacuum on).
Reading one byte of each page through a memory map costs a few milliseconds for 50 MB, where
`PRAGMA quick_check` reads and parses every page (about ten times longer). Garbage written
over a page start is found this way; what the check flags is then confirmed by
`quick_check` before the database is called damaged, so a freelist page with odd leftover
bytes never stops anyone.
"""

from __future__ import annotations

import mmap
import os
import sqlite3

MAGIC = b"SQLite format 3\x00"
PAGE_STARTS = b"\x00\x02\x05\x0a\x0d"
LOCK_BYTE_OFFSET = 1 << 30
"""SQLite's lock-byte page holds this offset; its content is never used."""


def odd_pages(path: str) -> bool:
    """Whether some page of the database at `path` starts with a byte no page starts with.
    False when the file is missing, empty or not a SQLite database at all (SQLite itself
    reports the last)."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < 100:
                return False
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                return _odd(mapped, size)
    except (OSError, ValueError):
        return False


def _odd(mapped: mmap.mmap, size: int) -> bool:
    header = mapped[:100]
    if header[:16] != MAGIC or int.from_bytes(header[52:56], "big"):
        return False  # not a database (SQLite says so), or auto-vacuum's pointer maps
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        return False
    firsts = mapped[page::page]  # page 2 onwards (page 1 starts with the file header)
    if size > LOCK_BYTE_OFFSET:
        lock_index = LOCK_BYTE_OFFSET // page - 1
        firsts = firsts[:lock_index] + firsts[lock_index + 1 :]
    return bool(firsts.translate(None, PAGE_STARTS))


def first_problem(path: str) -> str | None:
    """What `PRAGMA quick_check` finds first in the database at `path` (opened read-only,
    so that not even a checkpoint writes to it), or None when it finds nothing."""
    try:
        conn = sqlite3.connect(read_only_uri(path), uri=True)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    except sqlite3.Error as exc:
        return str(exc)
    finally:
        conn.close()
    found = str(rows[0][0]) if rows else "no answer from quick_check"
    return None if found == "ok" else f"quick_check: {found}"


def read_only_uri(path: str) -> str:
    from urllib.parse import quote

    return f"file:{quote(os.path.abspath(path))}?mode=ro"


def file_identity(path: str) -> tuple[int, int] | None:
    """The device and inode of the file at `path` (None: there is none)."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino
