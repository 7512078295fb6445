"""The turn's first snapshot of the files is taken once its first request is on its way: the
model is asked without waiting for git (or competing with it), the snapshot is taken while the
model works, and no tool runs before the snapshot is complete."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from checkpoint_support import workspace_agent

from talaria.events import Event, StatusChanged
from talaria.testing import calls, text
from talaria.testing.script import Step
from talaria.testing.server import ScriptedProvider

LOGGED_GIT = '#!/bin/sh\necho "$@" >> "{log}"\nexec "{git}" "$@"\n'
"""A git that notes each of its runs in the log file, then runs the real one."""
GATED_GIT = '#!/bin/sh\nwhile [ ! -e "{gate}" ]; do sleep 0.01; done\nexec "{git}" "$@"\n'
"""A git that waits until the gate file exists, then runs the real one."""


def _wrapped_git(
    script: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **names: Path
) -> None:
    """Put `script` (a shell script formatted with `names` and the real git) first on PATH as
    git, with HOME in `tmp_path`."""
    git = shutil.which("git")
    assert git, "git is needed for checkpoints"
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(script.format(git=git, **names))
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(git).parent}")


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
    gate = tmp_path / "gate"
    _wrapped_git(GATED_GIT, tmp_path, monkeypatch, gate=gate)
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


def test_the_snapshot_starts_once_the_request_is_on_its_way_and_before_the_answer(
    provider: ScriptedProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "git.log"
    _wrapped_git(LOGGED_GIT, tmp_path, monkeypatch, log=log)
    (tmp_path / "work").mkdir()
    seen: list[tuple[bool, bool]] = []

    def answer_once_git_ran(body: dict[str, Any]) -> Step:
        # (had git run when the request came, did it run while the model "thought")
        seen.append((log.exists(), _wait_for(log.exists)))
        return text("done")

    provider.add(answer_once_git_ran)
    with workspace_agent(provider, tmp_path) as agent:
        result = agent.run_conversation("hello")
        assert result["final_response"] == "done"
        assert seen == [(False, True)]
        assert [c.kind for c in agent.checkpoints()][:1] == ["turn"]
