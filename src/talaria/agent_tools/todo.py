"""The agent's task list: a short checklist the model keeps for multi-step work.

It lives beside the conversation rather than in it, so it survives compression: the loop
re-injects `render()` after compressing, and the `todo` tool persists it in the session store
so a resumed session gets it back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from talaria.tools.base import Tool, ToolContext, ToolError

if TYPE_CHECKING:
    from talaria.agent_tools.services import AgentServices

STATUSES = ("pending", "in_progress", "completed", "cancelled")
MARKS = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]", "cancelled": "[-]"}
STATE_KEY = "todos"


class TodoError(ValueError):
    """The model sent a todo list that cannot be applied; the message says how to fix it."""


def _item_id(raw: dict[str, Any], where: str) -> str:
    value = raw.get("id")
    if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
        raise TodoError(f"{where}: 'id' must be a non-empty string, got {value!r}")
    return str(value).strip()


def _clean(raw: Any, where: str, current: dict[str, str] | None) -> dict[str, str]:
    """A validated item; `current` is the stored item a merge updates (fields it keeps)."""
    if not isinstance(raw, dict):
        raise TodoError(f"{where}: each todo must be an object with id, content, status")
    item = dict(current) if current else {"id": _item_id(raw, where), "status": "pending"}
    if "content" in raw or current is None:
        content = raw.get("content")
        if not isinstance(content, str) or not content.strip():
            raise TodoError(f"{where}: 'content' must be a non-empty string")
        item["content"] = content.strip()
    if "status" in raw:
        status = raw["status"]
        if status not in STATUSES:
            raise TodoError(
                f"{where}: 'status' must be one of {', '.join(STATUSES)}, got {status!r}"
            )
        item["status"] = status
    return {"id": item["id"], "content": item["content"], "status": item["status"]}


def _as_list(todos: Any) -> list[Any]:
    if not isinstance(todos, list):
        raise TodoError("todos must be an array of {id, content, status} objects")
    return todos


class TodoList:
    """Ordered todo items; safe to use from parallel tool calls."""

    def __init__(self, items: list[dict[str, Any]] | None = None) -> None:
        self._lock = threading.Lock()
        self._items: list[dict[str, str]] = []
        if items:
            self.apply(items)

    def apply(
        self,
        todos: Any = None,
        merge: bool = False,
        on_change: Callable[[list[dict[str, str]]], None] | None = None,
    ) -> list[dict[str, str]]:
        """None reads the list; otherwise replace it, or with merge=True update items by id
        (only the fields given) and append unknown ids. Returns the resulting list.

        `on_change` (e.g. a save to the session store) sees the new list before it takes
        effect, under the lock: if it raises, nothing changes, and parallel writers cannot
        persist out of order."""
        if not isinstance(merge, bool):
            raise TodoError(f"merge must be true or false, got {merge!r}")
        with self._lock:
            if todos is not None:
                items = self._merged(_as_list(todos)) if merge else self._replaced(_as_list(todos))
                if on_change is not None:
                    on_change([dict(item) for item in items])
                self._items = items
            return [dict(item) for item in self._items]

    def _replaced(self, todos: list[Any]) -> list[dict[str, str]]:
        items = [_clean(raw, f"todos[{i}]", None) for i, raw in enumerate(todos)]
        ids = [item["id"] for item in items]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise TodoError(f"duplicate todo ids: {', '.join(duplicates)}")
        return items

    def _merged(self, todos: list[Any]) -> list[dict[str, str]]:
        items = [dict(item) for item in self._items]
        index = {item["id"]: n for n, item in enumerate(items)}
        for i, raw in enumerate(todos):
            where = f"todos[{i}]"
            if not isinstance(raw, dict):
                raise TodoError(f"{where}: each todo must be an object with id, content, status")
            item_id = _item_id(raw, where)
            if item_id in index:
                items[index[item_id]] = _clean(raw, where, items[index[item_id]])
            else:
                index[item_id] = len(items)
                items.append(_clean(raw, where, None))
        return items

    def summary(self) -> dict[str, int]:
        with self._lock:
            counts = {status: 0 for status in STATUSES}
            for item in self._items:
                counts[item["status"]] += 1
            return {"total": len(self._items), **counts}

    def render(self) -> str:
        """A compact checklist, one line per item ("" when empty)."""
        with self._lock:
            return "\n".join(
                f"{MARKS[item['status']]} #{item['id']} {item['content']}" for item in self._items
            )

    def to_json(self) -> list[dict[str, str]]:
        with self._lock:
            return [dict(item) for item in self._items]

    @classmethod
    def from_json(cls, data: list[dict[str, Any]] | None) -> TodoList:
        return cls(data or None)


def _todo(
    ctx: ToolContext[AgentServices], todos: Any = None, merge: bool = False
) -> dict[str, Any]:
    services = ctx.services

    def save(items: list[dict[str, str]]) -> None:
        services.store.set_state(services.session_id, STATE_KEY, items)

    try:
        items = services.todos.apply(todos, merge=merge, on_change=save)
    except TodoError as exc:
        raise ToolError(str(exc)) from exc
    return {"todos": items, "summary": services.todos.summary()}


DESCRIPTION = (
    "Keep a task list for multi-step work. Call with no arguments to read it. Pass `todos` to "
    "replace the whole list, or with merge=true to update items by id (only the fields you "
    "give) and add new ones. Each item: {id, content, status}; status is pending, in_progress, "
    "completed or cancelled. Keep one item in_progress at a time and mark items completed as "
    "soon as they are done."
)


TASK_LIST_TOOL = Tool(
    name="todo",
    description=DESCRIPTION,
    parameters={
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "description": "the items to write; omit to read the list",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "content": {"type": "string"},
                        "status": {"type": "string", "enum": list(STATUSES)},
                    },
                    "required": ["id"],
                },
            },
            "merge": {
                "type": "boolean",
                "description": "update by id instead of replacing (default false)",
            },
        },
        "additionalProperties": False,
    },
    handler=_todo,
    toolset="todo",
    context_param="ctx",
    retry_safe=True,
)
