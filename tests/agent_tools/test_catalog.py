"""The built-in tool catalogue: every tool in one fixed order (a model's prompt prefix is built
from it, so it must not move), and a toolset's modules loaded only when an agent chooses it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from helpers import run_python
from talaria.agent_tools.catalog import TOOLSETS, Capabilities, builtin_tools, select_tools

ORDER = [
    "terminal",
    "process",
    "read_file",
    "write_file",
    "patch",
    "search_files",
    "clarify",
    "todo",
    "memory",
    "session_search",
    "delegate_task",
    "web_fetch",
    "web_search",
    "skill_view",
    "skill_manage",
    "browser_navigate",
    "browser_snapshot",
    "browser_click",
    "browser_type",
    "browser_scroll",
    "browser_screenshot",
    "browser_console",
    "browser_tabs",
    "execute_code",
]


def test_the_built_in_tools_keep_their_order() -> None:
    tools = builtin_tools()
    assert [tool.name for tool in tools] == ORDER
    assert [TOOLSETS.index(tool.toolset) for tool in tools] == sorted(
        TOOLSETS.index(tool.toolset) for tool in tools
    )


def test_choosing_toolsets_gives_their_tools_in_the_same_order() -> None:
    every = builtin_tools()
    for chosen in (["code", "terminal"], ["browser", "file", "web"], ["skills"], []):
        expected = [tool.name for tool in every if tool.toolset in chosen]
        assert [tool.name for tool in builtin_tools(None, chosen)] == expected


def test_an_agent_without_web_browser_or_code_does_not_load_their_modules(tmp_path: Path) -> None:
    probe = (
        "import json, sys\n"
        "from talaria.agent_tools.catalog import Capabilities, select_tools\n"
        "caps = Capabilities(can_clarify=True, memory_enabled=True, can_delegate=True)\n"
        "names = [tool.name for tool in select_tools(None, caps)]\n"
        "loaded = sorted(name for name in sys.modules if name.startswith(("
        "'talaria.tools.web', 'talaria.tools.browser', 'talaria.tools.builtin.code')))\n"
        "print(json.dumps([names, loaded]))\n"
    )
    names, loaded = json.loads(run_python(probe, cwd=tmp_path).strip().splitlines()[-1])
    assert "terminal" in names and "delegate_task" in names
    assert not {"web_fetch", "browser_navigate", "execute_code"} & set(names)
    assert loaded == []


def test_web_on_by_its_setting_offers_the_web_tools() -> None:
    caps = Capabilities(can_clarify=False, memory_enabled=False, can_delegate=False)
    web = dataclasses.replace(caps, web_enabled=True)
    assert "web_fetch" not in {tool.name for tool in select_tools(None, caps)}
    assert "web_fetch" in {tool.name for tool in select_tools(None, web)}
