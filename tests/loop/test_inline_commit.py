"""A step's commit happens on the event loop's thread when SQLite can take it at once (no
thread hop per step), and never makes the loop wait: a busy database, a large append or a
slow disk send the commit to the io lane as before."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

import talaria.store.sqlite as sqlite_store
from helpers import add
from talaria import Agent, tool
from talaria.store.sqlite import INLINE_LIMIT, SQLiteSessionStore
from talaria.testing import ScriptedModel, call, text

Items = list[tuple[int, dict[str, Any]]]


class RecordingStore(SQLiteSessionStore):
    """The real store, noting on which thread each in-place attempt ran and how it ended (a
    subclass that changed `append_messages` would opt out of in-place commits)."""

    def __init__(self, path: Path, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self.attempts: list[tuple[int, bool]] = []

    def try_append_messages(self, session_id: str, items: Items, **kwargs: Any) -> bool:
        done = super().try_append_messages(session_id, items, **kwargs)
        self.attempts.append((threading.get_ident(), done))
        return done


@tool(max_result_chars=2 * INLINE_LIMIT)
def big(n: int) -> str:
    """Return a result larger than an in-place commit takes.

    Args:
        n: ignored
    """
    return "x" * (INLINE_LIMIT + 1000)


HOLDER: list[sqlite3.Connection] = []


@tool
def take_lock(n: int) -> str:
    """Lock the session database from another connection (HOLDER), as another process would.

    Args:
        n: ignored
    """
    HOLDER[0].execute("BEGIN IMMEDIATE")
    return "locked"


def _agent(tmp_path: Path, store: SQLiteSessionStore, *steps: Any) -> Agent:
    return Agent(
        model=ScriptedModel(list(steps)),
        home=tmp_path,
        store=store,
        tools=[add, big, take_lock],
        toolsets=[],
        config={"context.engine": "none"},
    )


def test_every_step_of_a_free_database_commits_on_the_loop_thread(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "state.db")
    steps = [call("add", {"a": n, "b": 1}) for n in range(3)]

    async def main() -> tuple[int, dict[str, Any]]:
        async with _agent(tmp_path, store, *steps, text("done")) as agent:
            return threading.get_ident(), await agent.arun_conversation(user_message="add")

    loop_thread, result = asyncio.run(main())
    assert result["final_response"] == "done"
    assert store.attempts == [(loop_thread, True)] * 5  # the user message, 3 steps, the answer
    assert store.load_messages(result["session_id"]) == result["messages"]
    store.close()


def test_a_held_write_lock_sends_the_commit_off_the_loop_which_keeps_running(
    tmp_path: Path,
) -> None:
    """Another process takes the database while a tool runs: the step's in-place attempt gives
    up at once, the io lane waits for the lock, and the loop goes on running meanwhile."""
    store = RecordingStore(tmp_path / "state.db", lock_timeout=60)
    holder = sqlite3.connect(tmp_path / "state.db", isolation_level=None, check_same_thread=False)
    HOLDER[:] = [holder]

    async def main() -> dict[str, Any]:
        async with _agent(tmp_path, store, call("take_lock", {"n": 1}), text("hello")) as agent:
            turn = asyncio.create_task(agent.arun_conversation(user_message="hi"))
            for _ in range(3000):
                if (threading.get_ident(), False) in store.attempts:
                    break
                await asyncio.sleep(0.01)
            for _ in range(5):  # the loop runs while the step's commit waits for the lock
                await asyncio.sleep(0.01)
            assert not turn.done()
            holder.execute("ROLLBACK")
            return await turn

    result = asyncio.run(main())
    holder.close()
    assert result["final_response"] == "hello"
    assert [done for _, done in store.attempts] == [True, False, True]
    assert store.load_messages(result["session_id"]) == result["messages"]
    store.close()


@pytest.mark.timeout(20)
def test_a_busy_database_refuses_in_place_without_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "LOCK_POLL", 30.0)  # a wait would show as 30 s
    store = SQLiteSessionStore(tmp_path / "state.db", lock_timeout=60)
    store.create_session("s1")
    holder = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    done = store.try_append_messages("s1", [(0, {"role": "user", "content": "x"})])
    holder.execute("ROLLBACK")
    holder.close()
    assert done is False
    assert store.message_count("s1") == 0, "a refused attempt writes nothing"
    assert store.try_append_messages("s1", [(0, {"role": "user", "content": "x"})])
    assert store.load_messages("s1") == [{"role": "user", "content": "x"}]
    store.close()


def test_a_large_step_is_committed_off_the_loop(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "state.db")

    async def main() -> dict[str, Any]:
        async with _agent(tmp_path, store, call("big", {"n": 1}), text("done")) as agent:
            return await agent.arun_conversation(user_message="go big")

    result = asyncio.run(main())
    assert [done for _, done in store.attempts] == [True, False, True]
    stored = store.load_messages(result["session_id"])
    assert stored == result["messages"]
    assert len(stored[2]["content"]) > INLINE_LIMIT
    store.close()


def test_the_wal_is_checkpointed_while_appends_go_on(tmp_path: Path) -> None:
    """SQLite's own checkpoint is off (it would run on the loop's thread with two fsyncs);
    the store runs one on the io lane every CHECKPOINT_EVERY commits instead."""
    store = SQLiteSessionStore(tmp_path / "state.db")
    store.create_session("s1")
    body = "word " * 2000
    for seq in range(1000):
        items = [(seq, {"role": "user", "content": f"{seq} {body}"})]
        if not store.try_append_messages("s1", items):
            store.append_messages("s1", items)  # a checkpoint held the store
    wal = (tmp_path / "state.db-wal").stat().st_size
    assert store.message_count("s1") == 1000
    assert wal < 20_000_000, f"the WAL grew to {wal} bytes: no checkpoint ran"
    store.close()
    assert not (tmp_path / "state.db-wal").exists(), "closing folds the WAL into the database"
    with SQLiteSessionStore(tmp_path / "state.db") as reopened:
        assert reopened.message_count("s1") == 1000


def test_a_subclass_that_changes_appends_gets_every_append(tmp_path: Path) -> None:
    seen: list[Items] = []

    class Mirrored(SQLiteSessionStore):
        def append_messages(self, session_id: str, items: Items, **kwargs: Any) -> None:
            seen.append(items)
            super().append_messages(session_id, items, **kwargs)

    store = Mirrored(tmp_path / "state.db")
    with _agent(tmp_path, store, call("add", {"a": 1, "b": 2}), text("3")) as agent:
        result = agent.run_conversation(user_message="add")
    assert [[m["role"] for _, m in items] for items in seen] == [
        ["user"],
        ["assistant", "tool"],
        ["assistant"],
    ]
    assert store.load_messages(result["session_id"]) == result["messages"]
    store.close()


def test_an_append_renews_the_writer_lease_only_when_half_of_it_is_gone(tmp_path: Path) -> None:
    """Renewing on every append would write the lease row at every step."""
    now = [1000.0]
    store = SQLiteSessionStore(tmp_path / "state.db", clock=lambda: now[0])
    store.create_session("s1")
    store.claim_writer("s1", "host:1:me")

    def expiry() -> float:
        with sqlite3.connect(tmp_path / "state.db") as conn:
            return float(conn.execute("SELECT expires_at FROM session_writers").fetchone()[0])

    claimed = expiry()
    now[0] += 30
    store.append_messages("s1", [(0, {"role": "user", "content": "a"})], writer="host:1:me")
    assert expiry() == claimed
    now[0] += 50  # 40 s of the 120 left
    store.append_messages("s1", [(1, {"role": "user", "content": "b"})], writer="host:1:me")
    assert expiry() == now[0] + 120
    store.close()
