"""Everything a turn needs, assembled once per agent and passed to the loop as one object.

The loop reads no globals, no clock and no environment: all of it arrives here (seams, not I/O:
docs/architecture.md), which is what lets tests, a child agent or a durable engine run the same
loop."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from talaria.config import Config
from talaria.core import Usage
from talaria.core.telemetry import NO_TELEMETRY, Telemetry
from talaria.events import EventSink, Notice
from talaria.interaction import Interactions
from talaria.interrupt import InterruptSignal
from talaria.loop.spending import Budgets, charge_active
from talaria.loop.steering import SteeringInbox
from talaria.plugins.hooks import HookBus
from talaria.providers.base import UsageLedger
from talaria.providers.resilience.caller import ModelCaller
from talaria.telemetry.base import telemetry_for
from talaria.tools.base import Tool
from talaria.tools.executor import ToolExecutor

if TYPE_CHECKING:
    from talaria.agent_tools.services import AgentServices
    from talaria.loop.context import LoopContext
    from talaria.skills.catalog import SkillCatalog
    from talaria.tools.sandbox import SandboxPolicy


def new_task_id() -> str:
    return f"task_{os.urandom(6).hex()}"


class ToolSource(Protocol):
    """Tools that may change between turns (MCP servers). Owned by the runtime."""

    async def changed_tools(self, emit: EventSink, taken: Iterable[str]) -> list[Tool] | None:
        """The current tools when they changed since the last call, else None."""

    def shared(self) -> ToolSource:
        """The same tools for a delegate child, which closes nothing of them."""
        ...

    def close(self) -> None: ...


@dataclass
class Runtime:
    """Everything a turn needs, assembled once per agent on its first turn."""

    config: Config
    caller: ModelCaller
    tools: dict[str, Tool]
    executor: ToolExecutor
    hooks: HookBus
    emit: EventSink
    interrupt: InterruptSignal
    cwd: Path
    home: Path
    max_iterations: int
    stream: bool = True
    services: AgentServices | None = None
    """What the agent's own tools work with (memory, task list, delegation)."""
    interactions: Interactions | None = None
    clarify: Callable[[str, str, list[str] | None], Awaitable[str | None]] | None = None
    """(call id, question, choices) -> the user's answer, None when it lapsed."""
    context: LoopContext | None = None
    """Runs the context engine: the history shrinks when it nears the window (None: never)."""
    sandbox: SandboxPolicy | None = None
    """The `SandboxPolicy` terminal commands run under (None: unconfined)."""
    clock: Callable[[], float] = time.monotonic
    new_id: Callable[[], str] = new_task_id
    tool_schemas: list[dict[str, Any]] = field(default_factory=list)
    telemetry: Telemetry = NO_TELEMETRY
    """Spans and metrics; left at the default, what `telemetry.*` says (off: nothing)."""
    budgets: Budgets = field(default_factory=Budgets)
    """Budgets in money and tokens; left at the default, what `agent.max_*` say."""

    profile: str | None = None
    """"lean" or "full" once chosen (`loop.profile`); None before the first turn."""
    tool_source: ToolSource | None = None
    stop_hook: str = "stop"
    """The hook point a finished turn calls: "stop", or "subagent_stop" in a delegate child."""
    skills: SkillCatalog | None = None
    """The agent's skills, looked at again at each turn's start (the index note)."""
    allowed_tools: frozenset[str] | None = None
    """When set, only these of the tool source's tools are offered (a named sub-agent's)."""
    steering: SteeringInbox = field(default_factory=SteeringInbox)
    """What the user says while the turn runs (steers; messages for the next turn)."""
    before_tools: Callable[[list[str]], Awaitable[None]] | None = None
    """Called with the names of a step's tools before they run (the agent's checkpoint
    before each step that could write; None: nothing)."""
    request_sent: Callable[[], None] | None = None
    """Called once a model request is on its way (`talaria.providers.transport.sent`; the
    agent starts the turn's first snapshot there; None: nothing)."""
    _source_names: list[str] = field(default_factory=list, init=False)
    _side_usage: Usage = field(default_factory=Usage, init=False)
    _side_models: UsageLedger = field(default_factory=UsageLedger, init=False)
    _side_lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        if not self.tool_schemas:
            self.tool_schemas = [tool.schema() for tool in self.tools.values()]
        if self.telemetry is NO_TELEMETRY:
            self.telemetry = telemetry_for(self.config)
        self.caller.telemetry = self.executor.telemetry = self.telemetry
        if not self.budgets.any:
            self.budgets = Budgets.from_config(self.config.agent)

    async def sync_tools(self) -> None:
        """Take the tool source's changes, at turn start only: within a turn the tool
        definitions stay byte-identical (they lead the prompt-cache prefix)."""
        if self.tool_source is None:
            return
        fixed = [name for name in self.tools if name not in self._source_names]
        try:
            changed = await self.tool_source.changed_tools(self.emit, fixed)
        except Exception as exc:
            self.emit(Notice("warning", f"tool list not updated: {type(exc).__name__}: {exc}"))
            return
        if changed is None:
            return
        allowed = self.allowed_tools
        changed = [tool for tool in changed if allowed is None or tool.name in allowed]
        for name in self._source_names:
            self.tools.pop(name, None)
        self.tools.update((tool.name, tool) for tool in changed)
        self._source_names = [tool.name for tool in changed]
        schemas = [tool.schema() for tool in self.tools.values()]
        if self.profile == "lean":
            from talaria.prompt.profile import lean_schema

            schemas = [lean_schema(schema) for schema in schemas]
        self.tool_schemas = schemas

    def close(self) -> None:
        if self.tool_source is not None:
            self.tool_source.close()

    def add_side_usage(self, usage: Usage, model: str = "", provider: str = "") -> None:
        """Usage spent outside the main call, counted in the turn. With `model`, a side call
        this agent made (summaries, titles): it is also charged to the turn's budget and
        recorded under that model. Without, a child agent's report: the child charged the
        budget as it went, and recorded its calls in its own session."""
        with self._side_lock:
            self._side_usage.add(usage)
            if model:
                self._side_models.add(model, provider, usage)
        if model:
            charge_active(usage)

    def drain_side_usage(self) -> Usage:
        with self._side_lock:
            usage, self._side_usage = self._side_usage, Usage()
        return usage

    def drain_side_models(self) -> UsageLedger:
        """The side calls since the last drain, by model."""
        with self._side_lock:
            models, self._side_models = self._side_models, UsageLedger()
        return models
