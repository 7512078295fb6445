"""`session/list`: the home's talaria sessions as the editor's session picker shows them.

Pages are newest activity first. The cursor is opaque to the editor and holds the offset of
the next page: a session that becomes active while the editor pages moves to the top, so a
later page may show a session again, but none is ever skipped.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import Any

from acp.schema import ListSessionsResponse, SessionInfo

from talaria.acp.describe import one_line
from talaria.acp.errors import invalid

PAGE_SIZE = 50
_CURSOR_PREFIX = "talaria-offset:"


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"{_CURSOR_PREFIX}{offset}".encode()).decode()


def decode_cursor(cursor: str | None) -> int:
    """The offset a cursor names (0 for none); a cursor we did not make is a clear error."""
    if not cursor:
        return 0
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
    except (binascii.Error, UnicodeError, ValueError):
        text = ""
    number = text.removeprefix(_CURSOR_PREFIX)
    if not text.startswith(_CURSOR_PREFIX) or not number.isdigit():
        raise invalid(f"session/list: {cursor!r} is not a cursor this agent gave out")
    return int(number)


def session_page(store: Any, cwd: str | None, cursor: str | None) -> ListSessionsResponse:
    """One page from the store (a session is stored from its `session/new` on)."""
    if cwd is not None and not cwd.startswith("/"):
        raise invalid(f"session/list: cwd must be an absolute path, got {cwd!r}")
    offset = decode_cursor(cursor)
    rows = store.list_sessions(limit=PAGE_SIZE + 1, offset=offset, cwd=cwd)
    listed = [session_info(row) for row in rows[:PAGE_SIZE] if row.cwd]
    more = len(rows) > PAGE_SIZE
    return ListSessionsResponse(
        sessions=listed, next_cursor=encode_cursor(offset + PAGE_SIZE) if more else None
    )


def session_info(row: Any) -> SessionInfo:
    """ACP's view of a stored session: its title, else the start of its first request."""
    title = row.title or one_line(row.preview) or None
    return SessionInfo(
        session_id=row.id, cwd=row.cwd, title=title, updated_at=iso_time(row.updated_at)
    )


def iso_time(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat()
