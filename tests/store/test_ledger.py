"""The gateway's delivery ledger on both backends: what a restarted gateway relies on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from talaria.store.ledger import LEDGER_FILES, DeliveryLedger, OutboundPart, PairingExpired
from talaria.store.sqlite import SQLiteSessionStore

HOUR = 3600.0
NOW = [1_000_000.0]
"""The ledger's clock: a test moves it on (`NOW[0] += ...`) instead of waiting."""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DeliveryLedger]:
    NOW[0] = 1_000_000.0
    if request.param == "sqlite":
        with SQLiteSessionStore(tmp_path / "state.db", clock=lambda: NOW[0]) as store:
            yield store
        return
    from talaria.store.postgres import PostgresSessionStore

    with PostgresSessionStore(request.getfixturevalue("pg_clean_url"), clock=lambda: NOW[0]) as pg:
        yield pg


def _part(n: int, turn: str = "t1", chat: str = "c1") -> OutboundPart:
    return OutboundPart(f"{turn}/{n}", "tg", chat, None, f"part {n}", reply_to="in-1")


def test_a_redelivered_update_is_recognised_and_an_unanswered_one_is_kept(
    ledger: DeliveryLedger,
) -> None:
    assert isinstance(ledger, DeliveryLedger)
    payload = {"text": "hello", "sender_id": "u1"}
    assert ledger.ledger_take_inbound("tg", "in-1", "chat", payload)
    assert not ledger.ledger_take_inbound("tg", "in-1", "chat", payload)
    assert ledger.ledger_take_inbound("slack", "in-1", "chat", payload)  # ids are per platform
    assert ledger.ledger_unfinished_inbound("tg") == [payload]
    ledger.ledger_finish_inbound("tg", "in-1")
    assert ledger.ledger_unfinished_inbound("tg") == []


def test_an_answer_is_pending_until_the_platform_confirms_each_part(
    ledger: DeliveryLedger,
) -> None:
    ledger.ledger_take_inbound("tg", "in-1", "chat", {"text": "hi"})
    ledger.ledger_record_answer([_part(0), _part(1)], inbound=("tg", "in-1"))
    ledger.ledger_record_answer([_part(0)])  # recording again changes nothing
    assert ledger.ledger_unfinished_inbound("tg") == []
    assert [p.text for p in ledger.ledger_pending("tg")] == ["part 0", "part 1"]
    ledger.ledger_count_attempt("t1/0")
    ledger.ledger_mark_sent("t1/0", "m-77")
    ledger.ledger_mark_dropped("t1/1")
    assert ledger.ledger_pending("tg") == []
    sent = ledger.ledger_part("t1/0")
    assert sent is not None
    assert (sent.status, sent.platform_message_id, sent.attempts) == ("sent", "m-77", 1)
    assert ledger.ledger_pending("slack") == []


def test_chats_keep_their_session_and_settings(ledger: DeliveryLedger) -> None:
    assert ledger.ledger_chat("tg|c1") is None
    ledger.ledger_set_chat("tg|c1", "tg", "s1", {"model": "m1"})
    ledger.ledger_set_chat("tg|c1", "tg", "s2", {"model": "m2", "busy": "queue"})
    assert ledger.ledger_chat("tg|c1") == {
        "session_id": "s2",
        "settings": {"model": "m2", "busy": "queue"},
    }


def test_pairing_gives_one_code_per_user_until_the_owner_approves_it(
    ledger: DeliveryLedger,
) -> None:
    code = ledger.ledger_request_pairing("tg", "u9", "Mallory", "ABC123", ttl=HOUR)
    assert code == "ABC123"
    assert ledger.ledger_request_pairing("tg", "u9", "Mallory", "ZZZ999", ttl=HOUR) == "ABC123"
    assert not ledger.ledger_is_paired("tg", "u9")
    assert ledger.ledger_approve_pairing("NOPE00", ttl=HOUR) is None
    assert ledger.ledger_approve_pairing("ABC123", ttl=HOUR) == ("tg", "u9")
    assert ledger.ledger_is_paired("tg", "u9")
    # a code is used up once approved
    assert ledger.ledger_approve_pairing("ABC123", ttl=HOUR) is None
    assert ledger.ledger_is_paired("tg", "u9")
    assert not ledger.ledger_is_paired("slack", "u9")


def test_a_pairing_code_expires_and_the_next_request_gets_a_fresh_one(
    ledger: DeliveryLedger,
) -> None:
    assert ledger.ledger_request_pairing("tg", "u9", "Mallory", "ABC123", ttl=HOUR) == "ABC123"
    NOW[0] += HOUR - 1
    assert ledger.ledger_request_pairing("tg", "u9", "Mallory", "ZZZ999", ttl=HOUR) == "ABC123"
    NOW[0] += 1
    with pytest.raises(PairingExpired):
        ledger.ledger_approve_pairing("ABC123", ttl=HOUR)
    assert not ledger.ledger_is_paired("tg", "u9")
    assert ledger.ledger_request_pairing("tg", "u9", "Mallory", "ZZZ999", ttl=HOUR) == "ZZZ999"
    assert ledger.ledger_approve_pairing("ABC123", ttl=HOUR) is None  # replaced: unknown now
    NOW[0] += HOUR - 1
    assert ledger.ledger_approve_pairing("ZZZ999", ttl=HOUR) == ("tg", "u9")
    NOW[0] += 100 * HOUR
    assert ledger.ledger_is_paired("tg", "u9")  # the code expires, not the pairing
    assert ledger.ledger_request_pairing("tg", "u9", "Mallory", "NEW111", ttl=HOUR) == "ZZZ999"


def test_a_file_sent_back_keeps_its_path_until_it_is_sent(ledger: DeliveryLedger) -> None:
    path = "/work/chat-files/tg-c1/report.txt"
    part = OutboundPart("t1/file0", "tg", "c1", None, "report.txt", reply_to="in-1", file=path)
    ledger.ledger_record_answer([_part(0), part])
    pending = ledger.ledger_pending("tg")
    assert [(p.text, p.file) for p in pending] == [("part 0", None), ("report.txt", path)]


def test_a_ledger_from_before_files_keeps_its_pending_answers(tmp_path: Path) -> None:
    import sqlite3

    from talaria.store.schema import MIGRATIONS

    before = MIGRATIONS.index(LEDGER_FILES)
    with sqlite3.connect(tmp_path / "state.db") as conn:
        for statement in (s for migration in MIGRATIONS[:before] for s in migration):
            conn.execute(statement)
        conn.execute(
            "INSERT INTO gateway_outbound (id, platform, chat_id, text, attempts, status, "
            "created_at) VALUES ('t1/0', 'tg', 'c1', 'an answer', 1, 'pending', 0)"
        )
        conn.execute(f"PRAGMA user_version = {before}")
    with SQLiteSessionStore(tmp_path / "state.db") as store:
        (pending,) = store.ledger_pending("tg")
    assert (pending.text, pending.file, pending.attempts) == ("an answer", None, 1)
