"""A throwaway world for the boundary tests: a workspace, a directory beside it, a talaria
home and a fake user HOME with canary files, all outside /tmp (the sandbox gives commands a
private /tmp, which would hide a directory there rather than protect it), and an agent driven
by the scripted provider that runs real tool calls in it."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import tool_results
from talaria import Agent
from talaria.testing import ScriptedProvider, calls, text
from talaria.tools.sandbox_probe import sandbox_support


def need_sandbox() -> None:
    """Skip (or, in CI, fail) a module whose cases need bubblewrap."""
    if not sandbox_support().available:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs bubblewrap for the sandbox tests: {sandbox_support().detail}")
        pytest.skip(sandbox_support().detail, allow_module_level=True)


def outside_tmp() -> str:
    for candidate in ("/var/tmp", str(Path(__file__).parent)):
        if os.access(candidate, os.W_OK) and not candidate.startswith("/tmp"):
            return candidate
    pytest.fail("no writable directory outside /tmp for the sandbox tests")


@pytest.fixture(name="world")
def world_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    """work (the workspace), outside (beside it), th (the talaria home), user (HOME)."""
    base = Path(tempfile.mkdtemp(prefix="talaria-boundary-", dir=outside_tmp()))
    names = {name: base / name for name in ("work", "outside", "th", "user")}
    for path in names.values():
        path.mkdir()
    monkeypatch.setenv("HOME", str(names["user"]))
    yield names
    shutil.rmtree(base, ignore_errors=True)


def make_agent(
    server: ScriptedProvider,
    world: dict[str, Path],
    mode: str = "workspace-write",
    approvals: str = "manual",
    **kw: Any,
) -> Agent:
    config = {
        "context.engine": "none",
        "sandbox.mode": mode,
        "approvals.mode": approvals,
        **kw.pop("config", {}),
    }
    return Agent(
        model="scripted-model",
        base_url=server.openai_base_url,
        api_key=kw.pop("api_key", "test-key"),
        home=kw.pop("home", world["th"]),
        cwd=kw.pop("cwd", world["work"]),
        toolsets=["terminal", "file"],
        config=config,
        **kw,
    )


def turn(server: ScriptedProvider, agent: Agent, *steps: tuple[str, dict[str, Any]]) -> list[str]:
    """One turn in which the model makes each call in turn; the tool results."""
    for step in steps:
        server.add(calls(step))
    server.add(text("done"))
    with agent:
        return tool_results(agent.run_conversation(user_message="go"))
