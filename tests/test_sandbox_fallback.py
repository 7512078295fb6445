"""Where bubblewrap is missing: one clear notice and the policy alone, or a refusal by config.

The machine's bubblewrap is hidden by running with a PATH that holds only bash."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import tool_results
from talaria import Agent
from talaria.events import Notice
from talaria.testing import ScriptedProvider, calls, text
from talaria.tools import sandbox
from talaria.tools.sandbox_probe import sandbox_support


@pytest.fixture
def no_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("bash", "touch", "cat"):
        found = shutil.which(program)
        assert found is not None
        (bin_dir / program).symlink_to(found)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(sandbox, "_notice_given", False)
    sandbox_support.cache_clear()
    yield
    monkeypatch.undo()
    sandbox_support.cache_clear()


def _agent(
    server: ScriptedProvider,
    tmp_path: Path,
    approver: Callable[[Any], object] | None = None,
    **config: object,
) -> Agent:
    """Unknown commands ask when nothing contains them: `approver` answers "once"."""
    return Agent(
        model="scripted-model",
        base_url=server.openai_base_url,
        api_key="test-key",
        home=tmp_path / "home",
        cwd=tmp_path,
        toolsets=["terminal"],
        config={"context.engine": "none", **config},
        approval_callback=None if approver is None else lambda r: approver(r) or "once",
    )


def test_without_bubblewrap_commands_run_after_one_notice(
    provider: ScriptedProvider, tmp_path: Path, no_bwrap: None
) -> None:
    assert not sandbox_support().available and "not installed" in sandbox_support().detail
    notices: list[str] = []
    provider.add(
        calls(("terminal", {"command": "touch one"}), ("terminal", {"command": "touch two"})),
        text("done"),
    )
    asked: list[str] = []
    agent = _agent(provider, tmp_path, approver=lambda request: asked.append(request.reason))
    agent.subscribe(lambda e: notices.append(e.message) if isinstance(e, Notice) else None)
    with agent:
        agent.run_conversation(user_message="go")
    assert (tmp_path / "one").exists() and (tmp_path / "two").exists()
    assert len(asked) == 2 and all("no sandbox to contain it" in reason for reason in asked)
    warned = [n for n in notices if "NOT sandboxed" in n]
    assert len(warned) == 1 and "bubblewrap (bwrap) is not installed" in warned[0]


def test_a_required_sandbox_refuses_to_run_without_bubblewrap(
    provider: ScriptedProvider, tmp_path: Path, no_bwrap: None
) -> None:
    provider.add(calls(("terminal", {"command": "touch made"})), text("done"))
    with _agent(provider, tmp_path, **{"sandbox.required": True}) as agent:
        (result,) = tool_results(agent.run_conversation(user_message="go"))
    assert "sandbox.required is true" in result and not (tmp_path / "made").exists()
