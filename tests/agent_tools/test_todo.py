"""The todo list: replace and merge semantics, validation, rendering, persistence."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from talaria.agent_tools.services import AgentServices
from talaria.agent_tools.todo import TASK_LIST_TOOL, TodoError, TodoList
from talaria.store.base import SessionNotFound
from talaria.store.sqlite import SQLiteSessionStore
from talaria.tools.base import ToolContext, ToolError

PLAN = [
    {"id": "1", "content": "read the failing test", "status": "completed"},
    {"id": "2", "content": "fix the parser", "status": "in_progress"},
    {"id": "3", "content": "run the suite"},
]


def test_replace_sets_the_whole_list_with_pending_as_default() -> None:
    todos = TodoList()
    assert todos.apply() == []
    items = todos.apply(PLAN)
    assert [i["status"] for i in items] == ["completed", "in_progress", "pending"]
    assert todos.apply([{"id": "9", "content": "only this"}]) == [
        {"id": "9", "content": "only this", "status": "pending"}
    ]


def test_merge_updates_given_fields_by_id_and_appends_new_ids() -> None:
    todos = TodoList(PLAN)
    items = todos.apply(
        [
            {"id": "2", "status": "completed"},
            {"id": "3", "status": "in_progress"},
            {"id": "4", "content": "write the changelog"},
        ],
        merge=True,
    )
    assert items == [
        {"id": "1", "content": "read the failing test", "status": "completed"},
        {"id": "2", "content": "fix the parser", "status": "completed"},
        {"id": "3", "content": "run the suite", "status": "in_progress"},
        {"id": "4", "content": "write the changelog", "status": "pending"},
    ]


def test_integer_ids_are_accepted_as_strings() -> None:
    todos = TodoList()
    items = todos.apply([{"id": 1, "content": "a"}])
    assert items == [{"id": "1", "content": "a", "status": "pending"}]
    assert todos.apply([{"id": 1, "status": "completed"}], merge=True)[0]["status"] == "completed"


@pytest.mark.parametrize(
    ("todos", "merge", "message"),
    [
        ([{"id": "1", "content": "x", "status": "done"}], False, "'status' must be one of"),
        ([{"id": "1"}], False, "'content' must be a non-empty string"),
        ([{"id": "new"}], True, "'content' must be a non-empty string"),
        ([{"content": "no id"}], False, "'id' must be a non-empty string"),
        ([{"id": True, "content": "x"}], False, "'id'"),
        (
            [{"id": "1", "content": "a"}, {"id": "1", "content": "b"}],
            False,
            "duplicate todo ids: 1",
        ),
        (["just a string"], False, "must be an object"),
        ({"id": "1"}, False, "must be an array"),
        ("[{}]", False, "must be an array"),
        ([], "yes", "merge must be true or false"),
    ],
)
def test_invalid_input_is_rejected_and_leaves_the_list_alone(
    todos: Any, merge: Any, message: str
) -> None:
    todo_list = TodoList(PLAN)
    before = todo_list.to_json()
    with pytest.raises(TodoError, match=message):
        todo_list.apply(todos, merge=merge)
    assert todo_list.to_json() == before


def test_render_is_a_compact_checklist() -> None:
    todos = TodoList([*PLAN, {"id": "4", "content": "old idea", "status": "cancelled"}])
    assert todos.render() == (
        "[x] #1 read the failing test\n[>] #2 fix the parser\n[ ] #3 run the suite\n[-] #4 old idea"
    )
    assert TodoList().render() == ""


def test_json_round_trip() -> None:
    todos = TodoList(PLAN)
    again = TodoList.from_json(json.loads(json.dumps(todos.to_json())))
    assert again.to_json() == todos.to_json()
    assert TodoList.from_json(None).to_json() == []


def test_a_failed_save_leaves_the_list_unchanged() -> None:
    todos = TodoList(PLAN)

    def broken_save(items: list[dict[str, str]]) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError):
        todos.apply([{"id": "z", "content": "new"}], on_change=broken_save)
    assert [i["id"] for i in todos.to_json()] == ["1", "2", "3"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteSessionStore]:
    with SQLiteSessionStore(tmp_path / "s.db") as store:
        store.create_session("s1")
        yield store


def _call(services: AgentServices, tmp_path: Path, **arguments: Any) -> dict[str, Any]:
    ctx = ToolContext(
        task_id="t",
        session_id=services.session_id,
        cwd=tmp_path,
        home=tmp_path,
        interrupt=threading.Event(),
        emit=lambda event: None,
        services=services,
    )
    tool = TASK_LIST_TOOL
    assert tool.context_param is not None
    result: dict[str, Any] = tool.handler(**{tool.context_param: ctx}, **arguments)
    return result


def test_todo_tool_persists_to_the_session_store(store: SQLiteSessionStore, tmp_path: Path) -> None:
    services = AgentServices(store=store, session_id="s1")
    result = _call(services, tmp_path, todos=PLAN)
    assert result["summary"] == {
        "total": 3,
        "pending": 1,
        "in_progress": 1,
        "completed": 1,
        "cancelled": 0,
    }
    _call(services, tmp_path, todos=[{"id": "2", "status": "completed"}], merge=True)
    saved = store.get_state("s1", "todos")
    assert [i["status"] for i in saved] == ["completed", "completed", "pending"]
    resumed = AgentServices(store=store, session_id="s1", todos=TodoList.from_json(saved))
    assert _call(resumed, tmp_path)["todos"] == saved


def test_todo_tool_read_does_not_write(store: SQLiteSessionStore, tmp_path: Path) -> None:
    services = AgentServices(store=store, session_id="s1")
    assert _call(services, tmp_path)["todos"] == []
    assert store.get_state("s1", "todos") is None


def test_todo_tool_reports_bad_input_to_the_model(
    store: SQLiteSessionStore, tmp_path: Path
) -> None:
    services = AgentServices(store=store, session_id="s1")
    with pytest.raises(ToolError, match="status"):
        _call(services, tmp_path, todos=[{"id": "1", "content": "x", "status": "wip"}])


def test_todo_tool_does_not_keep_a_list_it_could_not_save(tmp_path: Path) -> None:
    with SQLiteSessionStore(tmp_path / "s.db") as store:
        services = AgentServices(store=store, session_id="never-created")
        with pytest.raises(SessionNotFound):
            _call(services, tmp_path, todos=PLAN)
        assert services.todos.to_json() == []


def test_todo_tool_schema_is_the_public_contract() -> None:
    tool = TASK_LIST_TOOL
    assert (tool.name, tool.toolset) == ("todo", "todo")
    assert set(tool.parameters["properties"]) == {"todos", "merge"}
    assert "required" not in tool.parameters
