"""What a tool is, and what it may see of the agent while it runs."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    from talaria.core import ToolApprover
    from talaria.events import EventSink
    from talaria.policy.approval import Assessment
    from talaria.tools.sandbox import SandboxPolicy

    ServicesT = TypeVar("ServicesT", default=None)
else:  # the default only matters to type checkers; typing_extensions is not imported at run time
    from typing import TypeVar

    ServicesT = TypeVar("ServicesT")


class ToolError(Exception):
    """Raised by a handler to report a failure the model should read (no traceback shown)."""


class ToolCaller(Protocol):
    """`ToolContext.call_tool`: the agent's tools, and a way to call one."""

    @property
    def tools(self) -> Mapping[str, Tool]: ...

    async def __call__(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """(result, is_error) of calling tool `name` with `arguments`."""
        ...


@dataclass(slots=True)
class ToolContext(Generic[ServicesT]):
    """Per-call view of the agent that a handler can ask for by annotating a parameter
    with `ToolContext` (or `ToolContext[S]`, S the type of `services` it expects, as
    pydantic-ai's `RunContext[Deps]`). The parameter is hidden from the model's schema."""

    task_id: str
    session_id: str
    cwd: Path
    home: Path
    interrupt: threading.Event
    emit: EventSink
    call_id: str = ""
    clarify: Callable[[str, list[str] | None], Awaitable[str | None]] | None = None
    """Ask the user (question, choices); None when the question lapsed unanswered."""
    services: ServicesT = None  # type: ignore[assignment]  # None is the default ServicesT
    """Agent-level state for agent-level tools: an agent's runtime gives its
    `talaria.agent_tools.services.AgentServices` (store, memory, todos, delegation)."""
    approver: ToolApprover | None = None
    """Asks for a human's yes through the agent's own approval path (see
    `talaria.core.ToolApprover`); the executor gives every call one. None outside a run."""
    sandbox: SandboxPolicy | None = None
    """The sandbox commands run under (None: unconfined)."""
    call_tool: ToolCaller | None = None
    """Runs another tool of this agent as if the model had called it: the same hooks,
    approval policy and events as a direct call. Given by the executor (`execute_code` uses
    it); None outside a run."""
    approved: str = ""
    """The command text the user (or a grant) approved for this call, empty when none was
    needed: a file tool writes only what was judged (`talaria.tools.write_boundary`)."""
    idempotency_key: str = ""
    """The same for every attempt at this one call (a durable worker retrying it after a
    crash); a tool with side effects can use it to do them once. Empty in-process."""


@dataclass(slots=True)
class Tool:
    """A callable the model can invoke. Build one with `@tool` or directly with a JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[..., Any]
    toolset: str = "custom"
    interactive: bool = False
    """Interactive tools (they need a human) run alone, never beside other calls."""
    context_param: str | None = None
    """Name of the handler parameter that receives the `ToolContext`, if any."""
    check: Callable[[], bool] | None = None
    """Availability check; a tool whose check returns False is not offered to the model."""
    timeout: float | None = None
    max_result_chars: int | None = None
    assess: Callable[[dict[str, Any], Path, Path], Assessment | None] | None = None
    """The approval policy's verdict for a tool outside its own table (MCP tools): given the
    arguments, cwd and home, an Assessment when the call needs a yes, else None."""
    precheck: Callable[[dict[str, Any]], None] | None = None
    """Checks of the validated arguments that the JSON schema cannot express (two arguments
    that must differ), run before any approval is asked: raise `ToolError` saying what to fix."""
    writes: Callable[[dict[str, Any], Path, Path], Path | None] | None = None
    """The file a call would write (given the arguments, cwd and home), for a tool that writes
    outside the sandbox's reach (in-process, like `write_file`): the write boundary judges it
    before the call, and the handler checks what it opened with `write_boundary.check_write`."""
    retry_safe: bool = False
    """Running it again for the same call does no harm (it only reads, or it is idempotent,
    e.g. by `ToolContext.idempotency_key`). A durable worker reruns a call that a crash cut
    short only for such tools; others are reported as interrupted instead of run twice."""
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        self.is_async = inspect.iscoroutinefunction(self.handler)

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool schema; adapters convert it for other wire APIs."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def available(self) -> bool:
        if self.check is None:
            return True
        try:
            return bool(self.check())
        except Exception:
            return False
