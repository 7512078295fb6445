"""Approval grants mean what the user saw: two agents' always-grants both persist, a session grant
ends with its session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from helpers import scripted_agent
from talaria.testing import ScriptedProvider, calls, text


def test_two_always_grants_from_two_agents_both_survive_a_restart(tmp_path: Path) -> None:
    one, two, other = tmp_path / "one", tmp_path / "two", tmp_path / "other"
    server = ScriptedProvider()
    for target in (one, two):
        server.add(calls(("terminal", {"command": f"rm -rf {target}"})), text("ok"))
    with server:
        agents = [
            scripted_agent(
                server,
                tmp_path,
                toolsets=["terminal"],
                tools=[],
                approval_callback=lambda r: "always",
            )
            for _ in range(2)
        ]
        for agent in agents:
            agent.warm_up()
        for agent, message in zip(agents, ("one", "two"), strict=True):
            agent.chat(message)
        for agent in agents:
            agent.close()
        saved = yaml.safe_load((tmp_path / "config.yaml").read_text())["command_allowlist"]
        assert saved == [f"rm -rf {one}", f"rm -rf {two}"]
        for target in (one, two, other):
            target.mkdir()
            server.add(calls(("terminal", {"command": f"rm -rf {target}"})), text("done"))
        with scripted_agent(server, tmp_path, toolsets=["terminal"], tools=[]) as headless:
            for message in ("one", "two", "other"):
                headless.chat(message)
    assert not one.exists() and not two.exists()
    assert other.exists(), "a grant never approves a different path"


def test_a_session_grant_ends_with_the_session(tmp_path: Path) -> None:
    target = tmp_path / "t"
    asked: list[str] = []

    def approve(request: Any) -> str:
        asked.append(request.command)
        return "session"

    server = ScriptedProvider()
    for _ in range(3):
        server.add(calls(("terminal", {"command": f"rm -rf {target}"})), text("ok"))
    with (
        server,
        scripted_agent(
            server, tmp_path, toolsets=["terminal"], tools=[], approval_callback=approve
        ) as agent,
    ):
        agent.chat("a")
        agent.chat("b")
        agent.new_session()
        agent.chat("c")
    assert len(asked) == 2, "asked once per session"
