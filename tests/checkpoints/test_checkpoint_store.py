"""The checkpoint store on its own: where it keeps its data, what it refuses to snapshot or to
write, and how old sessions' checkpoints are cleaned up."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from talaria.checkpoints import SessionCheckpoints, prune, remove_session, session_dir


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def _store(tmp_path: Path, work: Path, session: str = "s1") -> SessionCheckpoints:
    home = tmp_path / "talaria"
    return SessionCheckpoints(
        session_dir(home, session), [work], enabled=True, max_file_bytes=1 << 20, exclude=[home]
    )


def test_a_restore_never_writes_or_deletes_through_a_folder_swapped_for_a_link(
    # the link is taken away and the folder's files written back into a real folder
    tmp_path: Path,
) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "sub").mkdir(parents=True)
    outside.mkdir()
    (work / "sub" / "f.txt").write_text("before\n")
    (outside / "f.txt").write_text("outside\n")
    (outside / "new.txt").write_text("outside new\n")
    store = _store(tmp_path, work)
    store.begin_turn(0, "edit")
    (work / "sub" / "f.txt").write_text("after\n")
    (work / "sub" / "new.txt").write_text("made\n")
    store.end_turn()
    store.begin_turn(4, "swap")
    (work / "sub" / "f.txt").unlink()
    (work / "sub" / "new.txt").unlink()
    (work / "sub").rmdir()
    (work / "sub").symlink_to(outside)
    store.end_turn()
    report = store.rewind(1, files=True, conversation=False)
    assert (outside / "f.txt").read_text() == "outside\n"
    assert (outside / "new.txt").read_text() == "outside new\n"
    assert not (work / "sub").is_symlink() and (work / "sub" / "f.txt").read_text() == "before\n"
    assert report.restored == ("sub", "sub/f.txt") and not (work / "sub" / "new.txt").exists()


def test_the_talaria_home_inside_the_workspace_is_not_snapshotted(tmp_path: Path) -> None:
    work = tmp_path
    (work / "talaria").mkdir()
    (work / "talaria" / "state.db").write_text("database")
    store = _store(tmp_path, work)
    store.begin_turn(0, "one")
    (work / "talaria" / "state.db").write_text("changed")
    (work / "a.txt").write_text("a")
    store.end_turn()
    assert [turn.changed for turn in store.turns()] == [("a.txt",)]


def test_the_home_directory_is_never_snapshotted(tmp_path: Path, private_home: Path) -> None:
    store = _store(tmp_path, private_home)
    store.begin_turn(0, "one")
    (private_home / "a.txt").write_text("a")
    store.end_turn()
    assert store.skipped == [private_home] and store.turns()[0].changed == ()
    assert not (session_dir(tmp_path / "talaria", "s1") / "roots").exists()


def test_old_sessions_are_pruned_by_age_then_by_size(tmp_path: Path) -> None:
    home, work = tmp_path / "talaria", tmp_path / "work"
    work.mkdir()
    (work / "data.bin").write_bytes(os.urandom(300_000))
    for name in ("old", "middle", "new", "current"):
        store = _store(tmp_path, work, name)
        store.begin_turn(0, name)
        store.end_turn()
    day = 86400
    for name, age in (("old", 40 * day), ("middle", 2 * day), ("new", day)):
        journal = session_dir(home, name) / "journal.json"
        os.utime(journal, (time.time() - age, time.time() - age))
    assert prune(home, max_age_days=30, max_total_mb=100, keep="current") == ["old"]
    assert prune(home, max_age_days=30, max_total_mb=0.7, keep="current") == ["middle"]
    assert session_dir(home, "new").exists() and session_dir(home, "current").exists()
    remove_session(home, "new")
    assert not session_dir(home, "new").exists()


def test_a_session_id_unfit_for_a_folder_name_is_hashed(tmp_path: Path) -> None:
    folder = session_dir(tmp_path, "../../etc")
    assert folder.parent == tmp_path / "checkpoints" and folder.name.startswith("h-")
