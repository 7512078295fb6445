"""The session_search tool: what the model sees when it looks into past sessions."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from talaria.agent_tools.services import AgentServices
from talaria.agent_tools.session_search import SESSION_SEARCH_TOOL
from talaria.store.sqlite import SQLiteSessionStore
from talaria.tools.base import ToolContext, ToolError

NGINX_CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "terminal", "arguments": '{"command": "nginx -t"}'},
}


def _turn(question: str, answer: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteSessionStore]:
    with SQLiteSessionStore(tmp_path / "s.db") as store:
        store.create_session("old-deploy", title="deploy pipeline")
        deploy = [
            *_turn("why does the nginx deploy fail?", "the nginx config has a typo"),
            {"role": "assistant", "content": None, "tool_calls": [NGINX_CALL]},
            {"role": "tool", "tool_call_id": "c1", "content": "nginx ok " + "x" * 2000},
            *_turn("and the nginx reload?", "reload with systemctl"),
            *_turn("nginx logs?", "see /var/log/nginx"),
        ]
        store.append_messages("old-deploy", list(enumerate(deploy)))
        time.sleep(0.002)
        store.create_session("old-billing")
        store.append_messages(
            "old-billing",
            list(
                enumerate(
                    _turn("invoice totals are off by a cent", "rounding in nginx-free billing code")
                )
            ),
        )
        time.sleep(0.002)
        store.create_session("empty-one")
        store.create_session("current")
        store.append_messages("current", list(enumerate(_turn("nginx again", "looking"))))
        yield store


def _search(store: SQLiteSessionStore, tmp_path: Path, **arguments: Any) -> dict[str, Any]:
    services = AgentServices(store=store, session_id="current")
    ctx = ToolContext(
        task_id="t",
        session_id="current",
        cwd=tmp_path,
        home=tmp_path,
        interrupt=threading.Event(),
        emit=lambda event: None,
        services=services,
    )
    tool = SESSION_SEARCH_TOOL
    assert tool.context_param is not None
    result: dict[str, Any] = tool.handler(**{tool.context_param: ctx}, **arguments)
    return result


def test_matches_are_grouped_by_session_without_the_current_one(
    store: SQLiteSessionStore, tmp_path: Path
) -> None:
    result = _search(store, tmp_path, query="nginx")
    sessions = {s["session_id"]: s for s in result["sessions"]}
    assert set(sessions) == {"old-deploy", "old-billing"}
    deploy = sessions["old-deploy"]
    assert deploy["title"] == "deploy pipeline"
    assert len(deploy["matches"]) == 3  # a few per session, not every hit
    assert all("**nginx**" in m["snippet"].lower() for m in deploy["matches"])
    assert all(len(m["when"]) == len("2024-01-01 12:00") for m in deploy["matches"])


def test_each_match_shows_trimmed_surrounding_messages(
    store: SQLiteSessionStore, tmp_path: Path
) -> None:
    (session,) = _search(store, tmp_path, query="typo")["sessions"]
    (match,) = session["matches"]
    assert [m["role"] for m in match["context"]] == ["user", "assistant", "assistant"]
    assert match["context"][1]["text"] == "the nginx config has a typo"
    assert match["context"][2]["text"] == '[called terminal({"command": "nginx -t"})]'
    (session,) = _search(store, tmp_path, query="xxxx*")["sessions"]
    tool_result = session["matches"][0]["context"][1]
    assert tool_result["role"] == "tool"
    assert len(tool_result["text"]) == 300 and tool_result["text"].endswith("…")


def test_limit_caps_the_number_of_sessions(store: SQLiteSessionStore, tmp_path: Path) -> None:
    assert len(_search(store, tmp_path, query="nginx", limit=1)["sessions"]) == 1
    assert len(_search(store, tmp_path, query="nginx", limit=0)["sessions"]) == 1
    assert len(_search(store, tmp_path, query="nginx", limit="2")["sessions"]) == 2
    with pytest.raises(ToolError, match="limit"):
        _search(store, tmp_path, query="nginx", limit="many")


def test_no_match_says_so(store: SQLiteSessionStore, tmp_path: Path) -> None:
    result = _search(store, tmp_path, query="kubernetes")
    assert result["sessions"] == [] and "no past session" in result["note"]


def test_an_unsearchable_query_is_an_error_the_model_can_read(
    store: SQLiteSessionStore, tmp_path: Path
) -> None:
    with pytest.raises(ToolError, match="no words"):
        _search(store, tmp_path, query="+++ ***")


def test_without_a_query_recent_sessions_are_listed(
    store: SQLiteSessionStore, tmp_path: Path
) -> None:
    recent = _search(store, tmp_path)["recent_sessions"]
    assert [s["session_id"] for s in recent] == ["old-billing", "old-deploy"]
    assert recent[0]["first_message"] == "invoice totals are off by a cent"
    assert recent[1]["messages"] == 8 and recent[1]["title"] == "deploy pipeline"
    assert [
        s["session_id"] for s in _search(store, tmp_path, query="  ", limit=1)["recent_sessions"]
    ] == ["old-billing"]


def test_session_search_schema_is_the_public_contract() -> None:
    tool = SESSION_SEARCH_TOOL
    assert (tool.name, tool.toolset) == ("session_search", "session_search")
    assert set(tool.parameters["properties"]) == {"query", "limit"}
    assert "required" not in tool.parameters
