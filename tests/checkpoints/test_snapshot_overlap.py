"""The turn's first snapshot of the files is taken while its first request goes out: the model
is asked without waiting for git, and no tool runs before the snapshot is complete."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
from checkpoint_support import workspace_agent

from talaria.events import Event, StatusChanged
from talaria.testing import calls, text
from talaria.testing.server import ScriptedProvider

GATED_GIT = '#!/bin/sh\nwhile [ ! -e "{gate}" ]; do sleep 0.01; done\nexec "{git}" "$@"\n'
"""A git that waits until the gate file exists, then runs the real one."""


def _wait_for(condition: object, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


def test_the_first_request_does_not_wait_for_the_snapshot_but_the_tools_do(
    provider: ScriptedProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git = shutil.which("git")
    assert git, "git is needed for checkpoints"
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    gate = tmp_path / "gate"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(GATED_GIT.format(gate=gate, git=git))
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(git).parent}")
    work = tmp_path / "work"
    work.mkdir()
    (work / "app.py").write_text("print(1)\n")
    provider.add(calls(("write_file", {"path": "app.py", "content": "print(2)\n"})))
    provider.add(text("done"))
    with workspace_agent(provider, tmp_path) as agent:
        statuses: list[str] = []

        def seen(event: Event) -> None:
            if isinstance(event, StatusChanged):
                statuses.append(event.status)

        agent.subscribe(seen)
        turn = threading.Thread(target=agent.chat, args=("change app.py",))
        turn.start()
        try:
            # the model is asked and its tool call is about to run while git still waits
            assert _wait_for(lambda: "executing_tools" in statuses), "the model was not asked"
            assert (work / "app.py").read_text() == "print(1)\n"
            assert len(provider.requests) == 1
        finally:
            gate.touch()
            turn.join(120)
        assert (work / "app.py").read_text() == "print(2)\n"
        agent.rewind(1, conversation=False)
        assert (work / "app.py").read_text() == "print(1)\n"
