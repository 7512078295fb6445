"""A delegate_task child runs under its parent's guards: its terminal call reaches the parent's
plugin hook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from talaria import Agent
from talaria.testing import ScriptedModel, call, text


def test_a_childs_terminal_call_reaches_the_parents_guard(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    class Guard:
        def register(self, hooks: Any) -> None:
            hooks.register("pre_tool_call", self.guard)

        def guard(self, tool_name: str, arguments: dict[str, Any], **kwargs: Any) -> Any:
            seen.append((tool_name, kwargs.get("session_id", "")))
            if tool_name == "terminal":
                return {"block": "no shell for children"}
            return None

    model = ScriptedModel(
        [
            call("delegate_task", {"goal": "list files"}),
            call("terminal", {"command": "ls"}),
            text("child done"),
            text("parent done"),
        ]
    )
    with Agent(
        model=model,
        home=tmp_path,
        cwd=tmp_path,
        plugins=[Guard()],
        toolsets=["delegation", "terminal"],
        config={"context.engine": "none", "delegation.max_concurrent_children": 1},
    ) as agent:
        result = agent.run_conversation(user_message="delegate")
    assert result["final_response"] == "parent done"
    assert ("terminal", seen[-1][1]) in seen and seen[0][0] == "delegate_task"
    child_results = [m["content"] for m in model.requests[2].messages if m.get("role") == "tool"]
    assert child_results == ["Blocked by a hook: no shell for children"]
