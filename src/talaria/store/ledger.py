"""The gateway's delivery ledger, kept in the session store (both SQLite and PostgreSQL).

Chat platforms deliver at least once and accept sends without a receipt the sender can count
on, so `talaria gateway` writes down, in the same database as the sessions:
- every inbound update by the platform's id (a redelivery is recognised; one that a crashed
  process took in but never answered is still `received` and runs again);
- every answer before it is sent (`pending`), marked `sent` with the platform's message id
  once the platform confirms, so a restart sends what is pending, once;
- which session each chat is (`/new` and `/resume` change it), with its per-room settings;
- DM pairing requests and the users the owner paired (`talaria gateway pair CODE`); a code
  is good for `gateway.pairing_code_ttl` seconds from when it was given.
The statements are plain SQL that both backends run as they are.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")
Conn = Any

RECEIVED, ANSWERED = "received", "answered"
PENDING, SENT, DROPPED = "pending", "sent", "dropped"


@dataclass(frozen=True, slots=True)
class OutboundPart:
    """One message of an answer: what to post where, and what became of it."""

    id: str
    """Unique per part (`<turn id>/<n>`): the platform's send key, so a resend is the same."""
    platform: str
    chat_id: str
    thread_id: str | None
    text: str
    reply_to: str | None = None
    edit_of: str | None = None
    """Post the part by editing this message of the bot's (its streamed preview)."""
    file: str | None = None
    """Post the file at this path (one the answer named in a `MEDIA:` line); `text` is then
    its name."""
    attempts: int = 0
    status: str = PENDING
    platform_message_id: str | None = None


_OUTBOUND = (
    "id, platform, chat_id, thread_id, text, reply_to, edit_of, file, attempts, status, "
    "platform_message_id"
)


class PairingExpired(LookupError):
    """The pairing code was given longer ago than it is good for: the user gets a new one
    with their next message."""


@runtime_checkable
class DeliveryLedger(Protocol):
    """What the gateway needs from the store (the SQL stores have it)."""

    def ledger_take_inbound(
        self, platform: str, message_id: str, chat_key: str, payload: dict[str, Any]
    ) -> bool: ...

    def ledger_finish_inbound(self, platform: str, message_id: str) -> None: ...

    def ledger_unfinished_inbound(self, platform: str) -> list[dict[str, Any]]: ...

    def ledger_record_answer(
        self, parts: Sequence[OutboundPart], inbound: tuple[str, str] | None = None
    ) -> None: ...

    def ledger_mark_sent(self, part_id: str, platform_message_id: str) -> None: ...

    def ledger_mark_dropped(self, part_id: str) -> None: ...

    def ledger_count_attempt(self, part_id: str) -> None: ...

    def ledger_pending(self, platform: str) -> list[OutboundPart]: ...

    def ledger_part(self, part_id: str) -> OutboundPart | None: ...

    def ledger_chat(self, chat_key: str) -> dict[str, Any] | None: ...

    def ledger_set_chat(
        self, chat_key: str, platform: str, session_id: str | None, settings: dict[str, Any]
    ) -> None: ...

    def ledger_request_pairing(
        self, platform: str, user_id: str, user_name: str, code: str, *, ttl: float
    ) -> str: ...

    def ledger_approve_pairing(self, code: str, *, ttl: float) -> tuple[str, str] | None: ...

    def ledger_is_paired(self, platform: str, user_id: str) -> bool: ...


class SqlLedger:
    """`DeliveryLedger` in SQL that SQLite and PostgreSQL both run (mixed into the stores)."""

    _clock: Callable[[], float]

    @abstractmethod
    def _read(self, work: Callable[[Conn], T]) -> T: ...

    @abstractmethod
    def _write(self, work: Callable[[Conn], T]) -> T: ...

    @abstractmethod
    def _run(self, conn: Conn, sql: str, params: Any = ()) -> Any: ...

    def _one(self, sql: str, params: tuple[Any, ...]) -> Any:
        return self._read(lambda conn: self._run(conn, sql, params).fetchone())

    def _all(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        return list(self._read(lambda conn: self._run(conn, sql, params).fetchall()))

    def _change(self, sql: str, params: tuple[Any, ...]) -> int:
        return int(self._write(lambda conn: self._run(conn, sql, params).rowcount))

    # -- inbound ------------------------------------------------------------------------

    def ledger_take_inbound(
        self, platform: str, message_id: str, chat_key: str, payload: dict[str, Any]
    ) -> bool:
        """Record an update; False when it was recorded before (a redelivery)."""
        return (
            self._change(
                "INSERT INTO gateway_inbound (platform, message_id, chat_key, payload, status, "
                "received_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (platform, message_id, chat_key, json.dumps(payload), RECEIVED, self._clock()),
            )
            == 1
        )

    def ledger_finish_inbound(self, platform: str, message_id: str) -> None:
        """The update needs nothing more (answered, refused, or a command done)."""
        self._change(
            "UPDATE gateway_inbound SET status = ? WHERE platform = ? AND message_id = ?",
            (ANSWERED, platform, message_id),
        )

    def ledger_unfinished_inbound(self, platform: str) -> list[dict[str, Any]]:
        """The payloads of updates taken in but never finished, oldest first."""
        rows = self._all(
            "SELECT payload FROM gateway_inbound WHERE platform = ? AND status = ? "
            "ORDER BY received_at",
            (platform, RECEIVED),
        )
        return [json.loads(row["payload"]) for row in rows]

    # -- outbound -----------------------------------------------------------------------

    def ledger_record_answer(
        self, parts: Sequence[OutboundPart], inbound: tuple[str, str] | None = None
    ) -> None:
        """Write an answer's parts as pending and finish the update it answers, at once."""
        now = self._clock()

        def work(conn: Conn) -> None:
            for p in parts:
                self._run(
                    conn,
                    f"INSERT INTO gateway_outbound ({_OUTBOUND}, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, NULL, ?) ON CONFLICT DO NOTHING",
                    (p.id, p.platform, p.chat_id, p.thread_id, p.text, p.reply_to, p.edit_of,
                     p.file, PENDING, now),
                )  # fmt: skip
            if inbound is not None:
                self._run(
                    conn,
                    "UPDATE gateway_inbound SET status = ? WHERE platform = ? AND message_id = ?",
                    (ANSWERED, *inbound),
                )

        self._write(work)

    def ledger_mark_sent(self, part_id: str, platform_message_id: str) -> None:
        self._change(
            "UPDATE gateway_outbound SET status = ?, platform_message_id = ?, sent_at = ? "
            "WHERE id = ?",
            (SENT, platform_message_id, self._clock(), part_id),
        )

    def ledger_mark_dropped(self, part_id: str) -> None:
        """The platform refused the part for good; it is not sent again."""
        self._change("UPDATE gateway_outbound SET status = ? WHERE id = ?", (DROPPED, part_id))

    def ledger_count_attempt(self, part_id: str) -> None:
        """Counted before each send: a restart sees that an earlier send may have arrived."""
        self._change("UPDATE gateway_outbound SET attempts = attempts + 1 WHERE id = ?", (part_id,))

    def ledger_pending(self, platform: str) -> list[OutboundPart]:
        rows = self._all(
            f"SELECT {_OUTBOUND} FROM gateway_outbound WHERE platform = ? AND status = ? "
            "ORDER BY created_at, id",
            (platform, PENDING),
        )
        return [_part(row) for row in rows]

    def ledger_part(self, part_id: str) -> OutboundPart | None:
        row = self._one(f"SELECT {_OUTBOUND} FROM gateway_outbound WHERE id = ?", (part_id,))
        return None if row is None else _part(row)

    # -- chats --------------------------------------------------------------------------

    def ledger_chat(self, chat_key: str) -> dict[str, Any] | None:
        """{"session_id", "settings"} of a chat the gateway has seen, else None."""
        row = self._one(
            "SELECT session_id, settings FROM gateway_chats WHERE chat_key = ?", (chat_key,)
        )
        if row is None:
            return None
        return {"session_id": row["session_id"], "settings": json.loads(row["settings"])}

    def ledger_set_chat(
        self, chat_key: str, platform: str, session_id: str | None, settings: dict[str, Any]
    ) -> None:
        self._change(
            "INSERT INTO gateway_chats (chat_key, platform, session_id, settings, updated_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (chat_key) DO UPDATE SET "
            "session_id = excluded.session_id, settings = excluded.settings, "
            "updated_at = excluded.updated_at",
            (chat_key, platform, session_id, json.dumps(settings), self._clock()),
        )

    # -- pairing ------------------------------------------------------------------------

    def ledger_request_pairing(
        self, platform: str, user_id: str, user_name: str, code: str, *, ttl: float
    ) -> str:
        """The user's pending code: `code` unless they were given one already less than
        `ttl` seconds ago (an expired one is replaced)."""
        now = self._clock()

        def work(conn: Conn) -> str:
            self._run(
                conn,
                "DELETE FROM gateway_pairing WHERE platform = ? AND user_id = ? "
                "AND approved_at IS NULL AND created_at <= ?",
                (platform, user_id, now - ttl),
            )
            self._run(
                conn,
                "INSERT INTO gateway_pairing (platform, user_id, user_name, code, approved_at, "
                "created_at) VALUES (?, ?, ?, ?, NULL, ?) ON CONFLICT DO NOTHING",
                (platform, user_id, user_name, code, now),
            )
            row = self._run(
                conn,
                "SELECT code FROM gateway_pairing WHERE platform = ? AND user_id = ?",
                (platform, user_id),
            ).fetchone()
            return str(row["code"])

        return self._write(work)

    def ledger_approve_pairing(self, code: str, *, ttl: float) -> tuple[str, str] | None:
        """Pair the user `code` was given to: (platform, user id); None for an unknown code or
        one approved already (a code lets in one user once: approving uses it up). Raises
        `PairingExpired` for a code given `ttl` seconds ago or more."""
        now = self._clock()

        def work(conn: Conn) -> tuple[str, str] | None:
            taken = self._run(
                conn,
                "UPDATE gateway_pairing SET approved_at = ? "
                "WHERE code = ? AND approved_at IS NULL AND created_at > ?",
                (now, code, now - ttl),
            )
            row = self._run(
                conn,
                "SELECT platform, user_id, approved_at FROM gateway_pairing WHERE code = ?",
                (code,),
            ).fetchone()
            if taken.rowcount == 1:  # the same statement decides for two approvals at once
                return str(row["platform"]), str(row["user_id"])
            if row is not None and row["approved_at"] is None:
                raise PairingExpired(code)
            return None

        return self._write(work)

    def ledger_is_paired(self, platform: str, user_id: str) -> bool:
        row = self._one(
            "SELECT approved_at FROM gateway_pairing WHERE platform = ? AND user_id = ?",
            (platform, user_id),
        )
        return row is not None and row["approved_at"] is not None


def _part(row: Any) -> OutboundPart:
    return OutboundPart(
        id=row["id"],
        platform=row["platform"],
        chat_id=row["chat_id"],
        thread_id=row["thread_id"],
        text=row["text"],
        reply_to=row["reply_to"],
        edit_of=row["edit_of"],
        file=row["file"],
        attempts=int(row["attempts"]),
        status=row["status"],
        platform_message_id=row["platform_message_id"],
    )


LEDGER_TABLES = (  # released as a migration: never edit, append a new one
    """
    CREATE TABLE gateway_inbound (
        platform TEXT NOT NULL,
        message_id TEXT NOT NULL,
        chat_key TEXT NOT NULL,
        payload TEXT NOT NULL,
        status TEXT NOT NULL,
        received_at {real} NOT NULL,
        PRIMARY KEY (platform, message_id)
    )
    """,
    "CREATE INDEX gateway_inbound_status ON gateway_inbound(platform, status)",
    """
    CREATE TABLE gateway_outbound (
        id TEXT PRIMARY KEY,
        platform TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        thread_id TEXT,
        text TEXT NOT NULL,
        reply_to TEXT,
        edit_of TEXT,
        attempts INTEGER NOT NULL,
        status TEXT NOT NULL,
        platform_message_id TEXT,
        created_at {real} NOT NULL,
        sent_at {real}
    )
    """,
    "CREATE INDEX gateway_outbound_status ON gateway_outbound(platform, status)",
    """
    CREATE TABLE gateway_chats (
        chat_key TEXT PRIMARY KEY,
        platform TEXT NOT NULL,
        session_id TEXT,
        settings TEXT NOT NULL,
        updated_at {real} NOT NULL
    )
    """,
    """
    CREATE TABLE gateway_pairing (
        platform TEXT NOT NULL,
        user_id TEXT NOT NULL,
        user_name TEXT NOT NULL,
        code TEXT NOT NULL UNIQUE,
        created_at {real} NOT NULL,
        approved_at {real},
        PRIMARY KEY (platform, user_id)
    )
    """,
)
"""The ledger's tables; `{real}` is the backend's floating-point type."""


def ledger_migration(real: str) -> tuple[str, ...]:
    return tuple(statement.format(real=real) for statement in LEDGER_TABLES)


LEDGER_FILES = ("ALTER TABLE gateway_outbound ADD COLUMN file TEXT",)
"""Files sent back go through the ledger like answers (`OutboundPart.file`)."""
