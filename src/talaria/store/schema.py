"""The SQLite on-disk format: the ordered migrations, how a canonical message maps onto a
row of the messages table (shared with the PostgreSQL store), and how a user's search text maps
onto an FTS5 query.

`PRAGMA user_version` records how many migrations a database has had; opening a database runs
the missing ones in one transaction. Never edit a released migration: append a new one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, cast

from talaria import fastjson
from talaria.core import Message
from talaria.store.base import SessionInfo, StoreError, UsageRecord, content_text
from talaria.store.ledger import LEDGER_FILES, ledger_migration

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: sessions, messages (+ full-text index), per-session state.
    (
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            title TEXT,
            source TEXT NOT NULL DEFAULT 'api',
            model TEXT,
            provider TEXT,
            api_mode TEXT,
            system_prompt TEXT,
            parent_session_id TEXT REFERENCES sessions(id) ON DELETE SET NULL,
            cwd TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            ended_at REAL,
            end_reason TEXT,
            message_count INTEGER NOT NULL DEFAULT 0,
            usage TEXT NOT NULL DEFAULT '{}'
        )
        """,
        "CREATE UNIQUE INDEX sessions_title ON sessions(title) WHERE title IS NOT NULL",
        "CREATE INDEX sessions_updated ON sessions(updated_at)",
        "CREATE INDEX sessions_parent ON sessions(parent_session_id)",
        """
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            content TEXT,
            content_is_json INTEGER NOT NULL DEFAULT 0,
            tool_calls TEXT,
            tool_call_id TEXT,
            name TEXT,
            reasoning TEXT,
            reasoning_details TEXT,
            extra TEXT,
            created_at REAL NOT NULL,
            UNIQUE (session_id, seq)
        )
        """,
        # prefix indexes keep "qu*"-style queries as fast as whole words
        "CREATE VIRTUAL TABLE messages_fts USING fts5("
        "body, tokenize = 'porter unicode61', prefix = '2 3')",
        """
        CREATE TABLE session_state (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (session_id, key)
        )
        """,
    ),
    # 2: one writer per session (a lease renewed by each append).
    (
        """
        CREATE TABLE session_writers (
            session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
            owner TEXT NOT NULL,
            expires_at REAL NOT NULL
        )
        """,
    ),
    # 3: per-model usage records, for reports by model, day and session.
    (
        """
        CREATE TABLE usage_records (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            created_at REAL NOT NULL,
            model TEXT NOT NULL,
            provider TEXT NOT NULL,
            calls INTEGER NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            cache_read_tokens INTEGER NOT NULL,
            cache_write_tokens INTEGER NOT NULL,
            reasoning_tokens INTEGER NOT NULL,
            cost_usd REAL
        )
        """,
        "CREATE INDEX usage_records_time ON usage_records(created_at)",
        "CREATE INDEX usage_records_session ON usage_records(session_id)",
    ),
    # 4: the search index is brought up to date behind the appends (store/search_index.py);
    # every message stored so far is indexed already.
    (
        """
        CREATE TABLE search_progress (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            indexed_upto INTEGER NOT NULL
        )
        """,
        "INSERT INTO search_progress (id, indexed_upto) "
        "SELECT 1, COALESCE(MAX(id), 0) FROM messages",
    ),
    # 5: the gateway's delivery ledger, chats and pairing (store/ledger.py).
    ledger_migration("REAL"),
    # 6: files sent back by the gateway are in its ledger.
    LEDGER_FILES,
)

USAGE_BUCKETS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
USAGE_COLUMNS = (
    f"session_id, created_at, model, provider, calls, {', '.join(USAGE_BUCKETS)}, cost_usd"
)

SCHEMA_VERSION = len(MIGRATIONS)


def usage_values(session_id: str, now: float, record: UsageRecord) -> tuple[Any, ...]:
    """A usage record as the values of `USAGE_COLUMNS` (every backend stores it so)."""
    usage = record.usage
    buckets = (int(usage.get(bucket) or 0) for bucket in USAGE_BUCKETS)
    return (session_id, now, record.model, record.provider, int(record.calls), *buckets,
            usage.get("estimated_cost_usd"))  # fmt: skip


def usage_record(row: Row) -> UsageRecord:
    return UsageRecord(
        session_id=row["session_id"],
        model=row["model"],
        provider=row["provider"],
        calls=row["calls"],
        usage={
            **{bucket: row[bucket] for bucket in USAGE_BUCKETS},
            "estimated_cost_usd": row["cost_usd"],
        },
        created_at=row["created_at"],
    )


PREVIEW_CHARS = 200


class Row(Protocol):
    """A result row by column name (sqlite3.Row, or a psycopg dict row)."""

    def __getitem__(self, key: str) -> Any: ...


MESSAGE_COLUMNS = (
    "role, content, content_is_json, tool_calls, tool_call_id, name, reasoning, "
    "reasoning_details, extra"
)
_TEXT_COLUMNS = ("tool_call_id", "name", "reasoning")


def dumps(value: Any) -> str:
    try:
        return fastjson.dumps(value)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"value is not JSON-serialisable: {exc}") from exc


def encode_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """Split a canonical message into a value for every column of MESSAGE_COLUMNS; anything
    that does not fit a typed column (unknown keys, explicit None values) goes to `extra`,
    so loading gives back exactly what was appended."""
    role = message.get("role")
    if not isinstance(role, str):
        raise StoreError(f"every message needs a string 'role', got {role!r}")
    row: dict[str, Any] = dict.fromkeys(c.strip() for c in MESSAGE_COLUMNS.split(","))
    row.update(role=role, content_is_json=0)
    extra: dict[str, Any] = {}
    for key, value in message.items():
        if key == "role":
            continue
        if key == "content" and isinstance(value, str):
            row["content"] = value
        elif key == "content" and isinstance(value, list):
            row["content"], row["content_is_json"] = dumps(value), 1
        elif key == "tool_calls" and isinstance(value, list):
            row["tool_calls"] = dumps(value)
        elif key in _TEXT_COLUMNS and isinstance(value, str):
            row[key] = value
        elif key == "reasoning_details" and value is not None:
            row["reasoning_details"] = dumps(value)
        else:
            extra[key] = value
    row["extra"] = dumps(extra) if extra else None
    return row


def decode_message(row: Row) -> Message:
    message: dict[str, Any] = {"role": row["role"]}
    if row["content"] is not None:
        message["content"] = (
            fastjson.loads(row["content"]) if row["content_is_json"] else row["content"]
        )
    if row["reasoning"] is not None:
        message["reasoning"] = row["reasoning"]
    if row["reasoning_details"] is not None:
        message["reasoning_details"] = fastjson.loads(row["reasoning_details"])
    if row["tool_calls"] is not None:
        message["tool_calls"] = fastjson.loads(row["tool_calls"])
    for key in ("tool_call_id", "name"):
        if row[key] is not None:
            message[key] = row[key]
    if row["extra"] is not None:
        message.update(fastjson.loads(row["extra"]))
    return cast(Message, message)


def search_body(message: Mapping[str, Any]) -> str:
    """What full-text search sees of a message: its text plus tool names and arguments."""
    parts = [content_text(message.get("content"))]
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        parts.extend(str(function.get(k) or "") for k in ("name", "arguments"))
    return "\n".join(p for p in parts if p).replace("\x00", " ")


def fts_query(text: str) -> str:
    """Turn free text into a safe FTS5 expression (the rules are `parse_query`'s)."""
    from talaria.store.query import parse_query  # a search's, not a session's first write

    rendered = []
    for term in parse_query(text):
        quoted = '"' + term.text.replace('"', '""') + '"' + ("*" if term.prefix else "")
        rendered.append(f"{term.operator} {quoted}" if term.operator else quoted)
    return " ".join(rendered)


_INFO_FIELDS = (
    "id", "title", "source", "model", "provider", "api_mode", "system_prompt",
    "parent_session_id", "cwd", "created_at", "updated_at", "ended_at", "end_reason",
    "message_count",
)  # fmt: skip


def session_info(row: Row) -> SessionInfo:
    """A sessions row (with its `preview` columns) as the `SessionInfo` callers see."""
    preview = row["preview"]
    if preview is not None and row["preview_is_json"]:
        preview = content_text(fastjson.loads(preview))
    return SessionInfo(
        **{name: row[name] for name in _INFO_FIELDS},
        usage=fastjson.loads(row["usage"]),
        preview=(preview or "")[:PREVIEW_CHARS],
    )
