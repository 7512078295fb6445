"""The PostgreSQL on-disk format: versioned migrations and the search query as a tsquery.

`schema_migrations` records which migrations a database has had; opening a store runs the
missing ones in one transaction under an advisory lock, so processes that start together
migrate once. Never edit a released migration: append a new one.
"""

from __future__ import annotations

from typing import Any

from talaria.store.base import StoreError
from talaria.store.ledger import LEDGER_FILES, ledger_migration
from talaria.store.query import parse_query

TEXT_SEARCH_CONFIG = "english"
"""Stemming like SQLite's porter tokenizer, so both backends find the same messages."""

MIGRATION_LOCK = 0x7A1A_01
"""Key of the advisory lock held while migrating."""

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: sessions, messages (+ full-text index), per-session state, the writer lease,
    # per-model usage records.
    (
        """
        CREATE TABLE sessions (
            id text PRIMARY KEY,
            ordinal bigserial,
            title text,
            source text NOT NULL DEFAULT 'api',
            model text,
            provider text,
            api_mode text,
            system_prompt text,
            parent_session_id text REFERENCES sessions(id) ON DELETE SET NULL,
            cwd text,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            ended_at double precision,
            end_reason text,
            message_count integer NOT NULL DEFAULT 0,
            usage text NOT NULL DEFAULT '{}'
        )
        """,
        "CREATE UNIQUE INDEX sessions_title ON sessions(title) WHERE title IS NOT NULL",
        "CREATE INDEX sessions_updated ON sessions(updated_at DESC, ordinal DESC)",
        "CREATE INDEX sessions_parent ON sessions(parent_session_id)",
        """
        CREATE TABLE messages (
            id bigserial PRIMARY KEY,
            session_id text NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq integer NOT NULL,
            role text NOT NULL,
            content text,
            content_is_json integer NOT NULL DEFAULT 0,
            tool_calls text,
            tool_call_id text,
            name text,
            reasoning text,
            reasoning_details text,
            extra text,
            created_at double precision NOT NULL,
            body text NOT NULL DEFAULT '',
            tsv tsvector NOT NULL,
            UNIQUE (session_id, seq)
        )
        """,
        "CREATE INDEX messages_tsv ON messages USING gin (tsv)",
        """
        CREATE TABLE session_state (
            session_id text NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            key text NOT NULL,
            value text NOT NULL,
            updated_at double precision NOT NULL,
            PRIMARY KEY (session_id, key)
        )
        """,
        """
        CREATE TABLE session_writers (
            session_id text PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
            owner text NOT NULL,
            expires_at double precision NOT NULL
        )
        """,
        """
        CREATE TABLE usage_records (
            id bigserial PRIMARY KEY,
            session_id text NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            created_at double precision NOT NULL,
            model text NOT NULL,
            provider text NOT NULL,
            calls integer NOT NULL,
            input_tokens bigint NOT NULL,
            output_tokens bigint NOT NULL,
            cache_read_tokens bigint NOT NULL,
            cache_write_tokens bigint NOT NULL,
            reasoning_tokens bigint NOT NULL,
            cost_usd double precision
        )
        """,
        "CREATE INDEX usage_records_time ON usage_records(created_at)",
        "CREATE INDEX usage_records_session ON usage_records(session_id)",
    ),
    # 2: the gateway's delivery ledger, chats and pairing (store/ledger.py).
    ledger_migration("double precision"),
    # 3: files sent back by the gateway are in its ledger.
    LEDGER_FILES,
)

SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: Any, where: str) -> None:
    """Bring the database to `SCHEMA_VERSION` (`conn` is a psycopg connection in autocommit)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        current = int(
            conn.execute("SELECT coalesce(max(version), 0) AS v FROM schema_migrations").fetchone()[
                "v"
            ]
        )
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"{where} has schema version {current}, newer than this talaria understands "
                f"({SCHEMA_VERSION}); upgrade talaria"
            )
        for version, statements in enumerate(MIGRATIONS[current:], start=current + 1):
            for statement in statements:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))


def tsquery(text: str) -> str:
    """The search text as a `to_tsquery` expression: every term is a quoted run of letters and
    digits (never syntax), a multi-word term is a phrase, OR / NOT / implied AND as typed."""
    joins = {None: " & ", "OR": " | ", "NOT": " & !"}
    rendered = ""
    for term in parse_query(text):
        words = [f"'{word}'" for word in term.words]
        if not words:
            continue
        if term.prefix:
            words[-1] += ":*"
        group = "(" + " <-> ".join(words) + ")"
        rendered = f"{rendered}{joins[term.operator]}{group}" if rendered else group
    return rendered or "''"
