"""The SQLite store's search index follows the appends instead of riding in each commit:
searches still see every message, from any process, exactly once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import talaria.offload
from talaria.store import sqlite as sqlite_store
from talaria.store.schema import MIGRATIONS
from talaria.store.sqlite import CHECKPOINT_EVERY, SQLiteSessionStore


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _indexed_rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM messages_fts").fetchone()[0])


def test_a_message_is_found_by_the_first_search_after_its_append(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "state.db")
    store.create_session("s1")
    assert store.try_append_messages("s1", [(0, _user("the aubergine recipe"))])
    store.append_messages("s1", [(1, _user("more about aubergines"))])
    assert _indexed_rows(tmp_path / "state.db") == 0, "the appends wrote no index rows"
    hits = store.search("aubergine")
    assert sorted(hit.message_seq for hit in hits) == [0, 1]
    assert len(store.search("aubergine")) == 2, "indexed once, not at every search"
    store.close()


def test_what_another_process_appended_is_found(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SQLiteSessionStore(path)
    store.create_session("mine")
    writer = textwrap.dedent(
        f"""
        from talaria.store.sqlite import SQLiteSessionStore
        store = SQLiteSessionStore({str(path)!r})
        store.create_session("theirs")
        store.append_messages("theirs", [(0, {{"role": "user", "content": "zeppelin plans"}})])
        import os
        os._exit(0)  # killed, in effect: no close, so nothing indexed it on the way out
        """
    )
    subprocess.run([sys.executable, "-c", writer], check=True, timeout=60)
    hits = store.search("zeppelin")
    assert [(hit.session_id, hit.message_seq) for hit in hits] == [("theirs", 0)]
    store.close()


def test_closing_leaves_the_index_complete(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "state.db")
    store.create_session("s1")
    store.append_messages("s1", [(i, _user(f"note {i}")) for i in range(5)])
    store.close()
    assert _indexed_rows(tmp_path / "state.db") == 5


def test_the_index_catches_up_every_few_commits_without_a_search(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "state.db")
    store.create_session("s1")
    for seq in range(CHECKPOINT_EVERY + 5):
        store.append_messages("s1", [(seq, _user(f"step {seq}"))])
    assert _indexed_rows(tmp_path / "state.db") >= CHECKPOINT_EVERY - 5
    store.close()


def test_a_message_truncated_before_it_was_indexed_is_never_found(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "state.db")
    store.create_session("s1")
    store.append_messages("s1", [(0, _user("keep this walrus")), (1, _user("drop this walrus"))])
    store.truncate_messages("s1", 1)
    store.append_messages("s1", [(1, _user("a new walrus"))])
    snippets = sorted(hit.snippet for hit in store.search("walrus"))
    assert snippets == ["a new **walrus**", "keep this **walrus**"]
    store.close()


def test_a_database_indexed_the_old_way_is_searched_without_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with sqlite3.connect(path, isolation_level=None) as conn:  # a store of schema version 3
        for statements in MIGRATIONS[:3]:
            for statement in statements:
                conn.execute(statement)
        conn.execute("PRAGMA user_version = 3")
        conn.execute(
            "INSERT INTO sessions (id, source, created_at, updated_at) VALUES ('old', 'cli', 1, 1)"
        )
        conn.execute(
            "INSERT INTO messages (session_id, seq, role, content, created_at) "
            "VALUES ('old', 0, 'user', 'an old marmalade note', 1)"
        )
        conn.execute("INSERT INTO messages_fts (rowid, body) VALUES (1, 'an old marmalade note')")
    store = SQLiteSessionStore(path)
    store.append_messages("old", [(1, _user("a new marmalade note"))])
    hits = store.search("marmalade")
    assert sorted(hit.message_seq for hit in hits) == [0, 1]
    store.close()
    assert _indexed_rows(path) == 2


def test_a_busy_database_postpones_the_catch_up_and_loses_nothing(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "state.db", lock_timeout=0.2)
    store.create_session("s1")
    store.append_messages("s1", [(0, _user("quokka sighting"))])
    holder = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        store._maintain()  # what the io lane runs every CHECKPOINT_EVERY commits
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert _indexed_rows(tmp_path / "state.db") == 0
    assert [hit.message_seq for hit in store.search("quokka")] == [0]
    store.close()


def test_in_place_commits_hand_the_catch_up_to_the_io_lane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed: list[object] = []

    class Lane:
        def start(self, call: object, deliver: object) -> None:
            handed.append(call)  # never run: the loop's thread must not have indexed either

    monkeypatch.setattr(talaria.offload, "lane", lambda name: Lane())
    store = SQLiteSessionStore(tmp_path / "state.db")
    store.create_session("s1")
    for seq in range(CHECKPOINT_EVERY):
        assert store.try_append_messages("s1", [(seq, _user(f"in place {seq}"))])
    assert handed == [store._maintain]
    assert _indexed_rows(tmp_path / "state.db") == 0
    store.close()


@pytest.mark.timeout(20)
def test_a_search_while_another_process_writes_answers_from_the_index_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "LOCK_POLL", 30.0)  # a wait for the lock would show
    store = SQLiteSessionStore(tmp_path / "state.db", lock_timeout=60)
    store.create_session("s1")
    store.append_messages("s1", [(0, _user("first pelican"))])
    assert [hit.message_seq for hit in store.search("pelican")] == [0]
    store.append_messages("s1", [(1, _user("second pelican"))])
    holder = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        during = [hit.message_seq for hit in store.search("pelican")]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert during == [0], "what was indexed, without waiting for the other writer"
    assert sorted(hit.message_seq for hit in store.search("pelican")) == [0, 1]
    store.close()


def test_a_search_that_cannot_write_the_index_answers_from_it_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteSessionStore(tmp_path / "state.db")
    store.create_session("s1")
    store.append_messages("s1", [(0, _user("an indexed heron"))])
    assert [hit.message_seq for hit in store.search("heron")] == [0]
    store.append_messages("s1", [(1, _user("a pending heron"))])

    def read_only(conn: sqlite3.Connection) -> int:
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(sqlite_store, "index_pending", read_only)
    assert [hit.message_seq for hit in store.search("heron")] == [0]
    monkeypatch.undo()
    assert sorted(hit.message_seq for hit in store.search("heron")) == [0, 1]
    store.close()
