"""Where bubblewrap is missing: one clear notice and the policy alone, or a refusal by config.

bubblewrap is never looked up on PATH; the machine's is hidden by configuring a
`sandbox.bwrap_path` where none is installed."""

from __future__ import annotations

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

MISSING = "/nonexistent/talaria-test/bwrap"


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(sandbox, "_notices_given", set())
    yield
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
        config={"context.engine": "none", "sandbox.bwrap_path": MISSING, **config},
        approval_callback=None if approver is None else lambda r: approver(r) or "once",
    )


def test_without_bubblewrap_commands_run_after_one_notice(
    provider: ScriptedProvider, tmp_path: Path, no_bwrap: None
) -> None:
    assert not sandbox_support(MISSING).available
    assert "not installed" in sandbox_support(MISSING).detail
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
