"""The SQLite store: the shared conformance kit plus what only a real file can show."""

from __future__ import annotations

import random
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from talaria.store.base import SearchQueryError, StoreError
from talaria.store.schema import SCHEMA_VERSION
from talaria.store.sqlite import SQLiteSessionStore

pytest.register_assert_rewrite("talaria.testing.store_conformance")  # readable failures in the kit
from talaria.testing.store_conformance import StoreConformance  # noqa: E402


class TestSQLiteConformance(StoreConformance):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SQLiteSessionStore]:
        with SQLiteSessionStore(tmp_path / "sessions.db") as store:
            yield store


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "sessions.db"


def test_sessions_survive_reopening(db: Path) -> None:
    with SQLiteSessionStore(db) as store:
        store.create_session("s1", title="kept")
        store.append_messages("s1", [(0, {"role": "user", "content": "remember me"})])
        store.set_state("s1", "todos", [{"id": "1"}])
    with SQLiteSessionStore(db) as store:
        assert store.resolve("kept") == "s1"
        assert store.load_messages("s1") == [{"role": "user", "content": "remember me"}]
        assert store.get_state("s1", "todos") == [{"id": "1"}]
        assert [h.session_id for h in store.search("remember")] == ["s1"]


def test_database_uses_wal_and_records_its_schema_version(db: Path) -> None:
    SQLiteSessionStore(db).close()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_a_newer_schema_is_refused_with_a_clear_error(db: Path) -> None:
    SQLiteSessionStore(db).close()
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer than this talaria"):
        SQLiteSessionStore(db)


def test_a_file_that_is_not_a_database_gives_a_store_error(db: Path) -> None:
    db.parent.mkdir(parents=True)
    db.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a database"):
        SQLiteSessionStore(db)


@pytest.mark.timeout(30)
def test_a_database_locked_by_another_writer_fails_after_the_stated_limit(db: Path) -> None:
    with SQLiteSessionStore(db, lock_timeout=0.3) as store:
        store.create_session("s1")
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreError, match=r"stayed locked for 0.3 s \(store.lock_timeout\)"):
            store.append_messages("s1", [(0, {"role": "user", "content": "x"})])
        other.execute("ROLLBACK")
        other.close()
        store.append_messages("s1", [(0, {"role": "user", "content": "x"})])
        assert store.message_count("s1") == 1


def test_bad_input_is_a_store_error(db: Path) -> None:
    with SQLiteSessionStore(db) as store:
        store.create_session("s1")
        with pytest.raises(StoreError, match="role"):
            store.append_messages("s1", [(0, {"content": "no role"})])
        with pytest.raises(StoreError, match="seq"):
            store.append_messages("s1", [(-1, {"role": "user", "content": "x"})])
        with pytest.raises(StoreError, match="JSON"):
            store.set_state("s1", "k", {"value": object()})
        with pytest.raises(StoreError, match="reserved"):
            store.rename("s1", "latest")
        assert store.load_messages("s1") == []


def test_threads_can_share_one_store(db: Path) -> None:
    with SQLiteSessionStore(db) as store:
        for n in range(6):
            store.create_session(f"t{n}")

        def append_many(n: int) -> None:
            for seq in range(50):
                store.append_messages(f"t{n}", [(seq, {"role": "user", "content": f"m{seq}"})])
                store.search("m1")

        threads = [threading.Thread(target=append_many, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [store.message_count(f"t{n}") for n in range(6)] == [50] * 6


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=st.text(max_size=40))
def test_any_query_text_gives_results_or_a_search_query_error(tmp_path: Path, query: str) -> None:
    with SQLiteSessionStore(tmp_path / "fuzz.db") as store:
        if store.get_session("s1") is None:
            store.create_session("s1")
            store.append_messages("s1", [(0, {"role": "user", "content": "alpha beta c++ x.py"})])
        try:
            assert isinstance(store.search(query), list)
        except SearchQueryError as exc:
            assert "no words" in str(exc)


def test_a_long_excluded_session_does_not_hide_older_matches(db: Path) -> None:
    with SQLiteSessionStore(db) as store:
        store.create_session("older")
        store.append_messages("older", [(0, {"role": "user", "content": "fix the flaky test"})])
        store.create_session("current")
        chatter = [{"role": "user", "content": f"flaky run {i}"} for i in range(2500)]
        store.append_messages("current", list(enumerate(chatter)))
        hits = store.search("flaky", exclude_session="current")
        assert [(h.session_id, h.message_seq) for h in hits] == [("older", 0)]


def _vm_steps(store: SQLiteSessionStore, action: Callable[[], object]) -> int:
    """How many SQLite virtual-machine instructions `action` costs on the store's connection
    (in units of 1,000): the work a query does, whatever the machine's speed."""
    counted = [0]

    def tick() -> int:
        counted[0] += 1
        return 0

    store._conn.set_progress_handler(tick, 1000)
    try:
        action()
    finally:
        store._conn.set_progress_handler(None, 1000)
    return counted[0] * 1000


WORDS = "deploy kubernetes python rust database index query error timeout retry cache token"


def _random_text(rng: random.Random, label: str) -> str:
    return " ".join(rng.choices(WORDS.split(), k=12)) + f" {label}"


def test_search_over_100k_messages_stays_bounded(db: Path) -> None:
    rng = random.Random(7)
    with SQLiteSessionStore(db) as store:
        for n in range(10):
            store.create_session(f"big{n}")
            messages = [
                {"role": "user", "content": _random_text(rng, f"id{n}x{i}")} for i in range(10_000)
            ]
            store.append_messages(f"big{n}", list(enumerate(messages)))
        store.create_session("current")
        messages = [{"role": "user", "content": _random_text(rng, "now")} for _ in range(500)]
        store.append_messages("current", list(enumerate(messages)))
        store.search("warm")  # brings the index up to date with the appends (not the query's work)
        for query in ("deploy", "kubernetes timeout", "id3x777", "deploy OR rust", "qu*"):
            for exclude in (None, "current"):
                steps = _vm_steps(
                    store, lambda q=query, x=exclude: store.search(q, limit=10, exclude_session=x)
                )
                # counted, not timed: ~50,000 here; a LIKE scan of the messages takes ~470,000
                assert steps < 200_000, (query, exclude, steps)
        assert [h.message_seq for h in store.search("id3x777")] == [777]
        hits = store.search("deploy", exclude_session="current")
        assert len(hits) == 10 and "current" not in {h.session_id for h in hits}
