"""The PostgreSQL store on a real server: the shared conformance kit, the writer lease, the
process-wide pool, migrations, and the agent selecting it through `store.url`."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from helpers import scripted_agent
from talaria.store.base import SessionBusy, StoreError, new_writer_id
from talaria.store.pg_schema import SCHEMA_VERSION
from talaria.store.postgres import PostgresSessionStore, shared_pool
from talaria.testing import ScriptedProvider, calls, text

pytest.register_assert_rewrite("talaria.testing.store_conformance")
from talaria.testing.store_conformance import StoreConformance  # noqa: E402


class TestPostgresConformance(StoreConformance):
    @pytest.fixture
    def store(self, pg_clean_url: str) -> Iterator[PostgresSessionStore]:
        with PostgresSessionStore(pg_clean_url) as store:
            yield store


@pytest.fixture
def store(pg_clean_url: str) -> PostgresSessionStore:
    return PostgresSessionStore(pg_clean_url)


def test_stores_on_one_url_share_one_pool_and_see_each_others_writes(pg_clean_url: str) -> None:
    pg_url = pg_clean_url
    first, second = PostgresSessionStore(pg_url), PostgresSessionStore(pg_url)
    assert first._pool is second._pool is shared_pool(pg_url)
    first.create_session("s1")
    first.append_messages("s1", [(0, {"role": "user", "content": "hello from one"})])
    second.close()  # closing one store leaves the shared pool to the others
    assert first.load_messages("s1") == [{"role": "user", "content": "hello from one"}]
    assert PostgresSessionStore(pg_url).load_messages("s1")[0]["content"] == "hello from one"


def test_threads_appending_at_once_lose_nothing(store: PostgresSessionStore) -> None:
    for n in range(8):
        store.create_session(f"s{n}")

    def writer(n: int) -> None:
        for seq in range(25):
            store.append_messages(f"s{n}", [(seq, {"role": "user", "content": f"m{seq}"})])

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(store.message_count(f"s{n}") == 25 for n in range(8))


def test_nul_characters_round_trip_in_content(store: PostgresSessionStore) -> None:
    store.create_session("s1")
    message = {"role": "tool", "tool_call_id": "c1", "content": "binary \x00 bytes"}
    store.append_messages("s1", [(0, message)])
    assert store.load_messages("s1") == [message]
    assert [hit.message_seq for hit in store.search("binary")] == [0]


def test_search_stems_like_sqlite(store: PostgresSessionStore) -> None:
    store.create_session("s1")
    store.append_messages("s1", [(0, {"role": "user", "content": "we are deploying the api"})])
    assert [hit.session_id for hit in store.search("deploy")] == ["s1"]
    assert [hit.session_id for hit in store.search('"deploying the api"')] == ["s1"]
    assert store.search('"api deploying"') == []


# -- the writer lease (the kit checks the rest) ---------------------------------------------


def test_an_append_renews_the_lease_and_an_expired_one_is_taken_over(pg_clean_url: str) -> None:
    now = [1000.0]
    store = PostgresSessionStore(pg_clean_url, clock=lambda: now[0])
    store.create_session("s1")
    first, second = new_writer_id(), new_writer_id()
    store.claim_writer("s1", first, ttl=30)
    now[0] += 29
    with pytest.raises(SessionBusy):
        store.claim_writer("s1", second)
    store.append_messages("s1", [(0, {"role": "user", "content": "a"})], writer=first)
    now[0] += 100  # the append renewed the lease past the claim's 30 s
    with pytest.raises(SessionBusy):
        store.claim_writer("s1", second)
    now[0] += 21
    store.claim_writer("s1", second)
    with pytest.raises(SessionBusy):
        store.append_messages("s1", [(1, {"role": "user", "content": "b"})], writer=first)


def test_the_compression_hand_over_is_one_transaction(pg_clean_url: str) -> None:
    store = PostgresSessionStore(pg_clean_url)
    store.create_session("parent", title="my work")
    writer = new_writer_id()
    store.claim_writer("parent", writer)
    with pytest.raises(StoreError, match="role"):  # fails at its last step: all is undone
        store.continue_in_child("parent", "child", [{"content": "no role"}], writer=writer)
    parent = store.get_session("parent")
    assert parent is not None and parent.title == "my work" and parent.ended_at is None
    assert store.get_session("child") is None
    summary = [{"role": "user", "content": "summary"}, {"role": "assistant", "content": "ok"}]
    store.continue_in_child("parent", "next", summary, state={"todos": [1]}, writer=writer)
    child = store.get_session("next")
    assert child is not None and child.title == "my work" and child.parent_session_id == "parent"
    assert store.load_messages("next") == summary and store.get_state("next", "todos") == [1]
    with pytest.raises(SessionBusy):
        store.claim_writer("next", new_writer_id())
    store.claim_writer("parent", new_writer_id())  # the lease moved to the child


# -- migrations and errors ------------------------------------------------------------------


def test_the_schema_version_is_recorded_and_a_newer_one_is_refused(pg_url: str) -> None:
    PostgresSessionStore(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_migrations")]
        assert versions == list(range(1, SCHEMA_VERSION + 1))
        conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    from talaria.store.postgres import close_pools

    close_pools()
    with pytest.raises(StoreError, match="newer than this talaria"):
        PostgresSessionStore(pg_url)


def test_processes_starting_together_migrate_once(pg_url: str) -> None:
    code = f"from talaria.store.postgres import PostgresSessionStore as S; S({pg_url!r})"
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(4)]
    assert [proc.wait(timeout=60) for proc in procs] == [0, 0, 0, 0]
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone() == (
            SCHEMA_VERSION,
        )


def test_an_unreachable_server_is_one_clear_error_without_the_password() -> None:
    with pytest.raises(StoreError) as excinfo:
        PostgresSessionStore("postgresql://bob:s3cret@127.0.0.1:9/db", connect_timeout=2)
    assert "127.0.0.1" in str(excinfo.value) and "s3cret" not in str(excinfo.value)


# -- the agent selects it -------------------------------------------------------------------


def test_an_agent_with_store_url_keeps_its_sessions_in_postgres(
    pg_url: str, tmp_path: Path
) -> None:
    with ScriptedProvider([calls(("add", {"a": 2, "b": 40})), text("42")]) as server:
        agent = scripted_agent(server, tmp_path, config={"store.url": pg_url})
        with agent:
            assert agent.chat("2 + 40?") == "42"
            session_id = agent.session_id
    assert not (tmp_path / "state.db").exists()
    stored = PostgresSessionStore(pg_url).load_messages(str(session_id))
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2]["content"] == "42"
