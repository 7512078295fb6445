"""Compression's hand-over to the child session is atomic: a kill at any step of it leaves one
live, titled session."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from talaria.store.sqlite import SQLiteSessionStore

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _integrity(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


HANDOVER = textwrap.dedent(
    """
    import os, signal, sys
    from talaria.store.sqlite import SQLiteSessionStore
    db, step = sys.argv[1], int(sys.argv[2])

    class Dying(SQLiteSessionStore):
        count = 0
        def _tick(self):
            Dying.count += 1
            if Dying.count == step:
                os.kill(os.getpid(), signal.SIGKILL)
        def create_session(self, *a, **k): super().create_session(*a, **k); self._tick()
        def update_session(self, *a, **k): super().update_session(*a, **k); self._tick()
        def rename(self, *a, **k): super().rename(*a, **k); self._tick()
        def set_state(self, *a, **k): super().set_state(*a, **k); self._tick()
        def release_writer(self, *a, **k): super().release_writer(*a, **k); self._tick()
        def claim_writer(self, *a, **k): super().claim_writer(*a, **k); self._tick()
        def append_messages(self, *a, **k): super().append_messages(*a, **k); self._tick()

    store = Dying(db)
    store.claim_writer("parent", "w")
    Dying.count = 0
    summary = [{"role": "user", "content": "summary"}, {"role": "assistant", "content": "ok"}]
    store.continue_in_child("parent", "child", summary, state={"todos": [1]}, writer="w")
    store._tick()
    print("finished")
    """
)


def test_a_kill_at_any_step_of_the_hand_over_leaves_one_live_titled_session(
    tmp_path: Path,
) -> None:
    for step in range(1, 12):
        db = tmp_path / f"state{step}.db"
        with SQLiteSessionStore(db) as store:
            store.create_session("parent")
            store.append_messages("parent", [(0, {"role": "user", "content": "hi"})])
            store.rename("parent", "my work")
        run = subprocess.run(
            [sys.executable, "-c", HANDOVER, str(db), str(step)],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=60,
        )
        with SQLiteSessionStore(db) as store:
            live = store.resolve("my work")
            info = store.get_session(live)
            child = store.get_session("child")
            messages = store.load_messages(live)
        assert _integrity(db) == "ok"
        if live == "parent":
            assert child is None, f"step {step}: a half-made child"
            assert info is not None and not info.ended_at
            assert [m["content"] for m in messages] == ["hi"]
        else:
            assert live == "child" and child is not None
            assert store_is_complete(messages, child)
        if "finished" in run.stdout:
            break
    assert "finished" in run.stdout, "the hand-over ran to completion in the last round"


def store_is_complete(messages: list[dict[str, Any]], child: Any) -> bool:
    return [m["content"] for m in messages] == ["summary", "ok"] and child.parent_session_id == (
        "parent"
    )
