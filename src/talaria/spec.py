"""What an agent is, as one frozen value: its model chain, tools, configuration, store,
plugins, MCP servers and limits.

`Agent.__init__` builds it from its arguments; `talaria.assembly` builds the runtime from it
on the first turn, and a `delegate_task` child is `spec.child(...)`, so every option is
threaded through one place. Building one is cheap: nothing here imports the tools, the store
or a provider.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from talaria.config import Config

if TYPE_CHECKING:
    from talaria.agent_tools.delegate import ChildPlan
    from talaria.loop.runtime import ToolSource
    from talaria.store.base import SessionStore
    from talaria.tools.base import Tool


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """The primary model as the caller named it; unset parts come from the configuration.
    `model` may also be a ready client (anything with `complete`)."""

    model: Any = None
    provider: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_mode: str | None = None


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """A frozen description of an agent; the parts that live while it runs (its session,
    event listeners, pending requests) stay on the `Agent`."""

    config: Config
    cwd: Path
    model: ModelChoice = ModelChoice()
    fallbacks: tuple[Any, ...] = ()
    """Fallback entries (dicts shaped like `fallback_providers`, or ready clients)."""
    tools: tuple[Tool, ...] = ()
    """The caller's own tools, offered after the chosen built-in toolsets."""
    toolsets: tuple[str, ...] | None = None
    """Built-in toolsets by name; None: the default set (see `agent_tools.catalog`)."""
    store: SessionStore | None = None
    """The caller's store; None: the configured one, opened on first use."""
    plugins: tuple[Any, ...] = ()
    max_iterations: int = 1
    """Model calls one turn may make."""
    stream: bool = True
    source: str = "api"
    """Who runs the agent, recorded with its sessions (api, cli, acp, subagent, ...)."""
    depth: int = 0
    """0 for an agent the user built; a delegate child is one deeper than its parent."""
    parent_session_id: str | None = None
    shared_tools: ToolSource | None = None
    """A parent's MCP servers, which a child uses instead of connecting its own."""
    skills: tuple[str, ...] = ()
    """Skills named at start-up: their instructions are in the session's system prompt."""
    prompt_notes: tuple[str, ...] = ()
    """What the front end adds to a new session's system prompt (the gateway: how to send a
    file back in this chat), after everything else so the prompt's start is the same."""
    only_tools: frozenset[str] | None = None
    """When set, the agent is offered only the tools of these names (a named sub-agent's
    `tools`), MCP tools included."""

    @property
    def home(self) -> Path:
        return self.config.home

    def child(
        self,
        *,
        plan: ChildPlan,
        parent_session_id: str,
        store: SessionStore,
        shared_tools: ToolSource | None,
    ) -> AgentSpec:
        """A `delegate_task` child as `plan` says (its toolsets and tools; its model and budget,
        else this model chain and `delegation.max_iterations`): this configuration (overrides
        included), `delegation.approvals` for its approval mode (a plan that asks nobody is
        `manual`: what needs a yes is refused, never run unasked); no user tools or plugins of
        its own (it shares the parent's hooks), no streaming, and no children of its own."""
        config = self.config
        overrides = copy.deepcopy(config.data)
        mode = config.delegation.approvals if plan.ask_user else "manual"  # deny: always asks
        overrides.setdefault("approvals", {})["mode"] = mode  # (nobody), so always refuses
        model = self.model
        if plan.model is not None and not hasattr(model.model, "complete"):
            model = replace(model, model=plan.model)
        return replace(
            self,
            config=Config.load(self.home, overrides=overrides),
            model=model,
            tools=(),
            toolsets=plan.toolsets,
            only_tools=plan.tools,
            store=store,
            plugins=(),
            max_iterations=plan.max_iterations or config.delegation.max_iterations,
            stream=False,
            source="subagent",
            depth=self.depth + 1,
            parent_session_id=parent_session_id,
            shared_tools=shared_tools,
            skills=(),
            prompt_notes=(),
        )
