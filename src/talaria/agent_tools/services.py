"""What agent-level tools may touch: the agent's own state, handed over as one object.

The agent builds one `AgentServices` per session and puts it in `ToolContext.services`; the
todo, memory, session_search and delegate_task tools read it instead of reaching into the
agent. It follows the conversation into a child session (`SessionContinued`) by itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from talaria.events import SessionContinued

if TYPE_CHECKING:
    from talaria.agent_tools.delegate import ChildRunner
    from talaria.agent_tools.memory import MemoryStore
    from talaria.agent_tools.todo import TodoList
    from talaria.skills.catalog import SkillCatalog
    from talaria.store.base import SessionStore


def _no_todos() -> TodoList:
    from talaria.agent_tools.todo import TodoList  # the todo tool's module types its context

    return TodoList()


@dataclass(kw_only=True)
class AgentServices:
    """What the agent's own tools (memory, todos, delegation) work with."""

    store: SessionStore
    session_id: str
    memory: MemoryStore | None = None
    """None when memory is disabled; the memory tool then reports that."""
    todos: TodoList = field(default_factory=_no_todos)
    delegate: ChildRunner | None = None
    """Runs child agents for delegate_task; None in a child (no further delegation) and
    when the agent does not offer delegate_task."""
    skills: SkillCatalog | None = None
    """The skills skill_view and skill_manage work with."""

    def carried_state(self) -> dict[str, Any]:
        """What a child session starts with when the conversation continues there: the
        task list, if there is one."""
        todos = self.todos.to_json()
        return {"todos": todos} if todos else {}

    def follow(self, event: SessionContinued) -> None:
        """When the conversation continues in another session, the tools work on that one."""
        self.session_id = event.session_id
