"""A corrupt, read-only, locked or full session database: one line and exit 2 in every command,
true statements about what was kept, a corrupt file never overwritten, `close()` never raises,
and once the fault is gone the next turn works on an intact store."""

from __future__ import annotations

import os
import resource
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_process import ask, cli, integrity, one_line, stored_contents
from helpers import scripted_agent
from talaria.store.base import StoreLocked
from talaria.testing import Reply, ScriptedProvider, text


@pytest.fixture
def server() -> Iterator[ScriptedProvider]:
    with ScriptedProvider([text("first"), text("second"), text("third")]) as provider:
        yield provider


def _first_turn(server: ScriptedProvider, home: Path) -> None:
    with scripted_agent(server, home) as agent:
        assert agent.chat("one") == "first"


def _next_turn_works(server: ScriptedProvider, home: Path, answer: str) -> None:
    with scripted_agent(server, home, session_id="latest") as agent:
        assert agent.chat("again") == answer
    assert integrity(home / "state.db") == "ok"


def test_a_corrupt_database_is_named_left_alone_and_the_fix_is_stated(
    tmp_path: Path, server: ScriptedProvider
) -> None:
    db = tmp_path / "state.db"
    db.write_bytes(b"this is no database, it was damaged " * 200)
    before = db.read_bytes()
    for argv in (("sessions", "list"), ("doctor",)):
        done = cli(tmp_path, *argv)
        assert "Traceback" not in done.stderr + done.stdout
        assert done.returncode == 2, argv
    asked = ask(tmp_path, server, "hello")
    line = one_line(asked.stderr)
    assert asked.returncode == 2
    assert f"session database {db} is damaged" in line
    assert f"mv {db} {db}.corrupt" in line
    assert "the question was not sent" in line
    assert db.read_bytes() == before, "a corrupt database is never overwritten"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("state.db")) == [
        "state.db"
    ]
    assert server.requests == []

    db.rename(tmp_path / "state.db.corrupt")  # what the message says to do
    with scripted_agent(server, tmp_path) as agent:
        assert agent.chat("one") == "first"
    assert integrity(db) == "ok"


def test_sessions_list_on_a_corrupt_database_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "state.db").write_bytes(b"\x00garbage" * 500)
    done = cli(tmp_path, "sessions", "list")
    assert done.returncode == 2
    assert "is damaged" in one_line(done.stderr)


def _read_only(home: Path) -> tuple[str, ...]:
    """How to run the CLI so that `home` is read-only for it. As an ordinary user that is
    chmod; as root (permissions do not apply) a read-only bind mount in a mount namespace."""
    if os.geteuid() != 0:
        home.chmod(0o555)
        return ()
    wrap = (
        "unshare", "-m", "sh", "-c",
        f'mount --bind "{home}" "{home}" && mount -o remount,ro,bind "{home}" "{home}" '
        '&& exec "$@"', "sh",
    )  # fmt: skip
    probe = subprocess.run([*wrap, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"running as root without mount namespaces: {probe.stderr.decode()[:80]}")
    return wrap


def test_a_read_only_home_is_one_line_in_every_command(
    tmp_path: Path, server: ScriptedProvider
) -> None:
    _first_turn(server, tmp_path)
    wrap = _read_only(tmp_path)
    try:
        asked = ask(tmp_path, server, "two", "--continue", wrap=wrap)
        line = one_line(asked.stderr)
        assert asked.returncode == 2
        assert "cannot be written" in line and "writable" in line
        listed = cli(tmp_path, "sessions", "list", wrap=wrap)
        assert "Traceback" not in listed.stderr
        assert listed.returncode == 2
        assert "cannot be written" in one_line(listed.stderr)
        configured = cli(tmp_path, "config", "set", "agent.max_turns", "5", wrap=wrap)
        assert configured.returncode == 2
        assert "cannot be written" in one_line(configured.stderr)
    finally:
        tmp_path.chmod(0o755)
    assert len(server.requests) == 1
    _next_turn_works(server, tmp_path, "second")
    assert stored_contents(tmp_path / "state.db") == ["one", "first", "again", "second"]


def _no_file_space() -> None:
    """The process cannot grow any file: what SQLite meets on a disk that is already full."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def test_a_full_disk_is_one_line_and_nothing_is_lost(
    tmp_path: Path, server: ScriptedProvider
) -> None:
    _first_turn(server, tmp_path)
    asked = ask(tmp_path, server, "two", "--continue", preexec=_no_file_space)
    line = one_line(asked.stderr)
    assert asked.returncode == 2
    assert "cannot be written" in line and "disk full" in line
    listed = cli(tmp_path, "sessions", "list", preexec=_no_file_space)
    assert "Traceback" not in listed.stderr
    assert listed.returncode in (0, 2)
    _next_turn_works(server, tmp_path, "second")
    assert stored_contents(tmp_path / "state.db") == ["one", "first", "again", "second"]


@pytest.fixture
def lock(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """Another process's write lock on the session database (this test process holds it)."""
    (tmp_path / "config.yaml").write_text("store:\n  lock_timeout: 1\n")
    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    yield conn
    conn.close()


def test_a_locked_database_waits_the_stated_limit_then_says_what_was_kept(
    tmp_path: Path, server: ScriptedProvider, lock: sqlite3.Connection
) -> None:
    _first_turn(server, tmp_path)
    lock.execute("BEGIN IMMEDIATE")
    resumed = ask(tmp_path, server, "two", "--continue")  # each run's own timeout: 30 s
    new = ask(tmp_path, server, "three")
    lock.execute("ROLLBACK")

    line = one_line(resumed.stderr)
    assert resumed.returncode == 2
    assert "stayed locked for 1 s (store.lock_timeout)" in line
    assert f"pid {os.getpid()}" in line
    assert "the question was not sent" in line
    assert new.returncode == 2
    assert "the question was not sent" in one_line(new.stderr)
    assert len(server.requests) == 1, "no model call was made without a place to save it"
    _next_turn_works(server, tmp_path, "second")
    assert stored_contents(tmp_path / "state.db") == ["one", "first", "again", "second"]


@pytest.mark.timeout(60)
def test_close_never_raises_when_the_store_is_locked(
    tmp_path: Path, server: ScriptedProvider, lock: sqlite3.Connection
) -> None:
    agent = scripted_agent(server, tmp_path)
    assert agent.chat("one") == "first"
    lock.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreLocked, match=r"stayed locked for 1 s \(store\.lock_timeout\)"):
        agent.run_conversation(user_message="two")
    agent.close()
    lock.execute("ROLLBACK")
    assert len(server.requests) == 1
    _next_turn_works(server, tmp_path, "second")


def test_a_save_failing_mid_turn_is_reported_truthfully(tmp_path: Path) -> None:
    """The lock is taken while the model answers: the turn fails with the store's reason,
    says how many messages are not saved, and close() retries them without raising."""
    holder: dict[str, sqlite3.Connection] = {}

    def take_lock(request: dict[str, object]) -> Reply:
        conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None, check_same_thread=False)
        conn.execute("BEGIN IMMEDIATE")
        holder["conn"] = conn
        return Reply(text="answer")

    (tmp_path / "config.yaml").write_text("store:\n  lock_timeout: 1\n")
    with ScriptedProvider([take_lock, text("later")]) as server:
        agent = scripted_agent(server, tmp_path)
        result = agent.run_conversation(user_message="one")
        unsaved = agent.unsaved_messages
        holder["conn"].execute("ROLLBACK")
        holder["conn"].close()
        agent.close()
        assert result["turn_exit_reason"] == "failed:store"
        assert "stayed locked for 1 s" in result["error"]
        assert "next turn" not in result["error"]
        assert unsaved == 1
        assert agent.unsaved_messages == 0, "close() saved what the turn could not"
        _next_turn_works(server, tmp_path, "later")
    assert stored_contents(tmp_path / "state.db") == ["one", "answer", "again", "later"]
