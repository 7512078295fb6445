"""The built-in toolsets and which of them an agent gets.

Toolset names are a public contract: terminal, file, clarify, todo, memory, session_search,
delegation, web, skills, browser, code. By default every toolset is on where it can work: `clarify`
needs someone to answer, `memory` needs memory enabled, `delegation` is not offered to
children. `web` reaches outside the machine, so it is on by default only with `web.enabled:
true` (else by name); `browser` likewise with `browser.enabled: true`; `code`
(`execute_code`) only by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from talaria.tools.base import Tool

if TYPE_CHECKING:
    from talaria.config import Config


@dataclass(frozen=True)
class Capabilities:
    """What this agent can support, which decides the default toolsets."""

    can_clarify: bool
    memory_enabled: bool
    can_delegate: bool
    web_enabled: bool = False
    browser_enabled: bool = False


Loader = Callable[["Config | None"], list[Tool]]
"""The tools of one toolset, built for an agent's configuration (None: the defaults)."""


def _terminal(config: Config | None) -> list[Tool]:
    from talaria.tools.builtin.processes import PROCESS_TOOL
    from talaria.tools.builtin.terminal import TERMINAL_TOOL

    return [TERMINAL_TOOL, PROCESS_TOOL]


def _file(config: Config | None) -> list[Tool]:
    from talaria.tools.builtin.files import FILE_TOOLS

    return list(FILE_TOOLS)


def _clarify(config: Config | None) -> list[Tool]:
    from talaria.tools.builtin.clarify import CLARIFY_TOOL

    return [CLARIFY_TOOL]


def _todo(config: Config | None) -> list[Tool]:
    from talaria.agent_tools.todo import TASK_LIST_TOOL

    return [TASK_LIST_TOOL]


def _memory(config: Config | None) -> list[Tool]:
    from talaria.agent_tools.memory import MEMORY_TOOL

    return [MEMORY_TOOL]


def _session_search(config: Config | None) -> list[Tool]:
    from talaria.agent_tools.session_search import SESSION_SEARCH_TOOL

    return [SESSION_SEARCH_TOOL]


def _delegation(config: Config | None) -> list[Tool]:
    from talaria.agent_tools.delegate import DELEGATE_TOOL

    return [DELEGATE_TOOL]


def _web(config: Config | None) -> list[Tool]:
    from talaria.tools.web.settings import WebSettings
    from talaria.tools.web.tools import web_tools

    return web_tools(WebSettings.from_config(config))


def _skills(config: Config | None) -> list[Tool]:
    from talaria.agent_tools.skills import SKILL_MANAGE_TOOL, SKILL_VIEW_TOOL

    return [SKILL_VIEW_TOOL, SKILL_MANAGE_TOOL]


def _browser(config: Config | None) -> list[Tool]:
    from talaria.tools.browser.settings import BrowserSettings
    from talaria.tools.browser.tools import browser_tools
    from talaria.tools.web.settings import WebSettings

    return browser_tools(WebSettings.from_config(config), BrowserSettings.from_config(config))


def _code(config: Config | None) -> list[Tool]:
    from talaria.tools.builtin.code import CODE_TOOL

    return [CODE_TOOL]


LOADERS: dict[str, Loader] = {
    "terminal": _terminal,
    "file": _file,
    "clarify": _clarify,
    "todo": _todo,
    "memory": _memory,
    "session_search": _session_search,
    "delegation": _delegation,
    "web": _web,
    "skills": _skills,
    "browser": _browser,
    "code": _code,
}
"""Each toolset's loader, so that a toolset's modules are imported only when it is chosen; in
the fixed order of the tools (and of the toolsets' names)."""

TOOLSETS: tuple[str, ...] = tuple(LOADERS)


def builtin_tools(
    config: Config | None = None, toolsets: Iterable[str] | None = None
) -> list[Tool]:
    """The built-in tools of `toolsets` (None: all), in the fixed order of TOOLSETS that keeps
    the prompt prefix byte-stable; the web and browser tools follow `config`'s settings."""
    wanted = set(TOOLSETS if toolsets is None else toolsets)
    return [tool for name in TOOLSETS if name in wanted for tool in LOADERS[name](config)]


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
    config: Config | None = None,
) -> list[Tool]:
    """Built-in tools of the chosen toolsets, then the user's tools; names must be unique.
    `config` is the agent's configuration (the web tools follow its `web.*` settings)."""
    chosen = list(toolsets) if toolsets is not None else default_toolsets(caps)
    unknown = [name for name in chosen if name not in TOOLSETS]
    if unknown:
        raise ValueError(
            f"unknown toolset(s): {', '.join(unknown)}; available: {', '.join(TOOLSETS)}"
        )
    selected = [t for t in builtin_tools(config, chosen) if t.available()]
    names = {tool.name for tool in selected}
    for tool in extra:
        if tool.name in names:
            raise ValueError(f"two tools are named {tool.name!r}; tool names must be unique")
        names.add(tool.name)
        selected.append(tool)
    return selected
