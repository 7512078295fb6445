"""Many processes, one database file: nothing is lost, and a killed writer corrupts nothing."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import time
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event
from pathlib import Path

from talaria.store.sqlite import SQLiteSessionStore

PER_PROCESS = 200
SHARED_WRITERS = 4
OWN_WRITERS = 4


def _append_worker(db: str, worker: int, start: Event) -> None:
    """Append one message per transaction, as the loop does after each model call."""
    store = SQLiteSessionStore(db)
    start.wait(30)
    shared = worker < SHARED_WRITERS
    session = "shared" if shared else f"own-{worker}"
    base = worker * PER_PROCESS if shared else 0
    for i in range(PER_PROCESS):
        message = {"role": "user", "content": f"worker {worker} message {i}"}
        store.append_messages(session, [(base + i, message)])
    store.close()


def _endless_writer(db: str, progress: Synchronized) -> None:
    """Resume the session where it stopped and keep appending turns until killed."""
    store = SQLiteSessionStore(db)
    seq = store.message_count("victim")
    while True:
        call = {
            "id": f"call_{seq}",
            "type": "function",
            "function": {"name": "terminal", "arguments": '{"command": "ls"}'},
        }
        store.append_messages(
            "victim",
            [
                (seq, {"role": "assistant", "content": None, "tool_calls": [call]}),
                (seq + 1, {"role": "tool", "tool_call_id": f"call_{seq}", "content": "a.py " * 50}),
            ],
        )
        store.update_session("victim", usage={"input_tokens": (seq + 2) // 2 * 10})
        seq += 2
        progress.value = seq


def _integrity(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def test_eight_processes_appending_at_once_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    with SQLiteSessionStore(db) as store:
        store.create_session("shared")
        for worker in range(SHARED_WRITERS, SHARED_WRITERS + OWN_WRITERS):
            store.create_session(f"own-{worker}")
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    workers = [
        ctx.Process(target=_append_worker, args=(str(db), n, start))
        for n in range(SHARED_WRITERS + OWN_WRITERS)
    ]
    for process in workers:
        process.start()
    start.set()
    for process in workers:
        process.join(120)
    assert [p.exitcode for p in workers] == [0] * len(workers)

    assert _integrity(db) == "ok"
    with SQLiteSessionStore(db) as store:
        shared = store.load_messages("shared")
        expected = [
            f"worker {w} message {i}" for w in range(SHARED_WRITERS) for i in range(PER_PROCESS)
        ]
        assert [m["content"] for m in shared] == expected
        assert store.message_count("shared") == SHARED_WRITERS * PER_PROCESS
        for worker in range(SHARED_WRITERS, SHARED_WRITERS + OWN_WRITERS):
            own = store.load_messages(f"own-{worker}")
            assert [m["content"] for m in own] == [
                f"worker {worker} message {i}" for i in range(PER_PROCESS)
            ]
        assert len(store.search('"worker 7 message 199"')) == 1


def test_a_writer_killed_mid_stream_leaves_a_resumable_session(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    with SQLiteSessionStore(db) as store:
        store.create_session("victim")
    ctx = mp.get_context("spawn")
    reached = 0
    for round_ in range(3):
        progress = ctx.Value("q", 0)
        writer = ctx.Process(target=_endless_writer, args=(str(db), progress))
        writer.start()
        deadline = time.monotonic() + 60
        while progress.value < reached + 100 + 37 * round_ and time.monotonic() < deadline:
            time.sleep(0.005)
        assert writer.pid is not None
        os.kill(writer.pid, signal.SIGKILL)
        writer.join(10)
        assert writer.exitcode == -signal.SIGKILL

        assert _integrity(db) == "ok"
        with SQLiteSessionStore(db) as store:
            messages = store.load_messages("victim")
            count = store.message_count("victim")
            usage = store.get_session("victim").usage  # type: ignore[union-attr]
        assert count == len(messages) >= reached + 100
        assert count % 2 == 0  # a call and its result are appended together, never half
        for seq in range(0, count, 2):
            assert messages[seq]["tool_calls"][0]["id"] == f"call_{seq}"
            assert messages[seq + 1]["tool_call_id"] == f"call_{seq}"
        # the totals are a separate write after the append: a kill may fall between the two
        assert usage["input_tokens"] in (count // 2 * 10, (count // 2 - 1) * 10)
        reached = count
