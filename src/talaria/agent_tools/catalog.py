"""The built-in toolsets and which of them an agent gets.

Toolset names are a public contract: terminal, file, clarify, todo, memory, session_search,
delegation, web, skills, browser, code. By default every toolset is on where it can work: `clarify`
needs someone to answer, `memory` needs memory enabled, `delegation` is not offered to
children. `web` reaches outside the machine, so it is on by default only with `web.enabled:
true` (else by name); `browser` likewise with `browser.enabled: true`; `code`
(`execute_code`) only by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from talaria.tools.base import Tool

TOOLSETS: tuple[str, ...] = (
    "terminal",
    "file",
    "clarify",
    "todo",
    "memory",
    "session_search",
    "delegation",
    "web",
    "skills",
    "browser",
    "code",
)


@dataclass(frozen=True)
class Capabilities:
    """What this agent can support, which decides the default toolsets."""

    can_clarify: bool
    memory_enabled: bool
    can_delegate: bool
    web_enabled: bool = False
    browser_enabled: bool = False


def builtin_tools(config: Any = None) -> list[Tool]:
    """Every built-in tool, in the fixed order that keeps the prompt prefix byte-stable; the
    web tools follow `config`'s `web.*` settings (None: the defaults)."""
    from talaria.agent_tools.delegate import DELEGATE_TOOL
    from talaria.agent_tools.memory import MEMORY_TOOL
    from talaria.agent_tools.session_search import SESSION_SEARCH_TOOL
    from talaria.agent_tools.skills import SKILL_MANAGE_TOOL, SKILL_VIEW_TOOL
    from talaria.agent_tools.todo import TASK_LIST_TOOL
    from talaria.tools.browser.settings import BrowserSettings
    from talaria.tools.browser.tools import browser_tools
    from talaria.tools.builtin import builtin_tools as core_tools
    from talaria.tools.builtin.code import CODE_TOOL
    from talaria.tools.web.settings import WebSettings
    from talaria.tools.web.tools import web_tools

    agent_tools = [TASK_LIST_TOOL, MEMORY_TOOL, SESSION_SEARCH_TOOL, DELEGATE_TOOL]
    skill_tools = [SKILL_VIEW_TOOL, SKILL_MANAGE_TOOL]
    web = WebSettings.from_config(config)
    return [
        *core_tools(),
        *agent_tools,
        *web_tools(web),
        *skill_tools,
        *browser_tools(web, BrowserSettings.from_config(config)),
        CODE_TOOL,
    ]


def default_toolsets(caps: Capabilities) -> list[str]:
    excluded = {
        "clarify": not caps.can_clarify,
        "memory": not caps.memory_enabled,
        "delegation": not caps.can_delegate,
        "web": not caps.web_enabled,
        "browser": not caps.browser_enabled,
        "code": True,  # only when named: a program that calls tools is a choice to make
    }
    return [name for name in TOOLSETS if not excluded.get(name, False)]


def select_tools(
    toolsets: Sequence[str] | None,
    caps: Capabilities,
    extra: Iterable[Tool] = (),
    config: Any = None,
) -> list[Tool]:
    """Built-in tools of the chosen toolsets, then the user's tools; names must be unique.
    `config` is the agent's configuration (the web tools follow its `web.*` settings)."""
    chosen = list(toolsets) if toolsets is not None else default_toolsets(caps)
    unknown = [name for name in chosen if name not in TOOLSETS]
    if unknown:
        raise ValueError(
            f"unknown toolset(s): {', '.join(unknown)}; available: {', '.join(TOOLSETS)}"
        )
    selected = (
        [t for t in builtin_tools(config) if t.toolset in chosen and t.available()]
        if chosen
        else []
    )
    names = {tool.name for tool in selected}
    for tool in extra:
        if tool.name in names:
            raise ValueError(f"two tools are named {tool.name!r}; tool names must be unique")
        names.add(tool.name)
        selected.append(tool)
    return selected
