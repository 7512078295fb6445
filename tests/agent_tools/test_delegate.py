"""delegate_task: isolated children with their own budgets, statuses and sessions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import scripted_agent
from talaria import Agent
from talaria.testing import Reply, Script, ScriptedCall, ScriptedProvider, calls, text

BANNED = {"delegate_task", "clarify", "memory"}


def _user_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in body["messages"] if m["role"] == "user")


def _is_child(body: dict[str, Any]) -> bool:
    return "Goal:" in _user_text(body)


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools", [])}


def _delegate_results(result: dict[str, Any]) -> list[dict[str, Any]]:
    (content,) = [m["content"] for m in result["messages"] if m["role"] == "tool"]
    return list(json.loads(content)["results"])


def routed(router: Any) -> ScriptedProvider:
    """A provider whose every answer comes from `router(request_body)`."""
    return ScriptedProvider(script=Script(fallback=router))


def make_parent(server: ScriptedProvider, home: Path, **config: Any) -> Agent:
    return scripted_agent(
        server, home, tools=[], toolsets=None, clarify_callback=lambda q, c: "x", config=config
    )


def test_child_sees_only_its_goal_and_no_banned_tools(tmp_path: Path) -> None:
    def script(body: dict[str, Any]) -> Reply:
        if _is_child(body):
            return text("child report: 3 files")
        if any(m["role"] == "tool" for m in body["messages"]):
            return text("the child says 3 files")
        return calls(("delegate_task", {"goal": "count the files", "context": "look in src/"}))

    with routed(script) as provider, make_parent(provider, tmp_path) as parent:
        result = parent.run_conversation(user_message="SECRET-PARENT-CONTEXT: how many files?")
        parent_session = parent.session_id
        store = parent.store
        (child,) = _delegate_results(result)
        child_info = store.get_session(child["session_id"])

    child_requests = [r.body for r in provider.requests if _is_child(r.body)]
    assert child_requests, "the child never called the model"
    for body in child_requests:
        assert "SECRET-PARENT-CONTEXT" not in json.dumps(body)
        assert "count the files" in _user_text(body) and "look in src/" in _user_text(body)
        assert not (_tool_names(body) & BANNED)
    assert "delegate_task" in _tool_names(provider.requests[0].body)
    assert child["status"] == "completed"
    assert child["summary"] == "child report: 3 files"
    assert child_info is not None and child_info.parent_session_id == parent_session
    assert result["final_response"] == "the child says 3 files"
    assert result["usage"]["total_tokens"] > child["usage"]["total_tokens"] > 0
    assert provider.invalid_requests == []


def test_three_children_one_hanging_give_three_terminal_statuses(tmp_path: Path) -> None:
    def script(body: dict[str, Any]) -> Reply:
        user = _user_text(body)
        if _is_child(body):
            if "hang" in user and not any(m["role"] == "tool" for m in body["messages"]):
                return Reply(tool_calls=[ScriptedCall("terminal", {"command": "sleep 3600"})])
            return text(f"finished: {user.splitlines()[1]}")
        if any(m["role"] == "tool" for m in body["messages"]):
            return text("all children reported")
        return calls(
            (
                "delegate_task",
                {"tasks": [{"goal": "alpha"}, {"goal": "hang forever"}, {"goal": "gamma"}]},
            )
        )

    with (
        routed(script) as provider,
        make_parent(provider, tmp_path, **{"delegation.timeout": 3}) as parent,
    ):
        result = parent.run_conversation(user_message="fan out")
    statuses = [(r["goal"], r["status"]) for r in _delegate_results(result)]
    assert statuses == [("alpha", "completed"), ("hang forever", "timeout"), ("gamma", "completed")]
    assert result["final_response"] == "all children reported"
