"""The one hook assembly calls: the configured servers as a tool source for the runtime.

The runtime asks the source for tool-list changes between turns (`changed_tools`), so the
tools of the current turn, and the prompt-cache prefix they sit in, never change mid-turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from talaria.events import EventSink, Notice
from talaria.mcp.config import parse_servers
from talaria.mcp.manager import MCPManager
from talaria.tools.base import Tool
from talaria.tools.sandbox import SandboxPolicy

if TYPE_CHECKING:
    from talaria.config import Config


class MCPTools:
    """A runtime's view of an MCPManager; a child agent's view shares its parent's servers."""

    def __init__(self, manager: MCPManager, *, owned: bool) -> None:
        self.manager = manager
        self.owned = owned
        self._signature: str | None = None
        self._order: dict[str, int] = {}

    async def changed_tools(self, emit: EventSink, taken: Iterable[str]) -> list[Tool] | None:
        """Start the servers on the first call, take announced list changes on later ones;
        the tools when they differ from the last answer, else None."""
        from talaria.mcp.tools import build_tools

        for message in await self.manager.start():
            emit(Notice("warning", message))
        await self.manager.refresh()
        tools = self._in_known_order(build_tools(self.manager, taken))
        signature = json.dumps([tool.schema() for tool in tools], sort_keys=True)
        if signature == self._signature:
            return None
        self._signature = signature
        for connection in self.manager.connections.values():
            for message in connection.offer.notices(connection.config):
                emit(Notice("warning", message))
        return tools

    def _in_known_order(self, tools: list[Tool]) -> list[Tool]:
        """Tools seen before keep their places and new ones go last, so a change moves as
        little of the cached prompt prefix as it can."""
        for tool in tools:
            self._order.setdefault(tool.name, len(self._order))
        return sorted(tools, key=lambda tool: self._order[tool.name])

    def shared(self) -> MCPTools:
        return MCPTools(self.manager, owned=False)

    def close(self) -> None:
        if self.owned:
            self.manager.close()


def connect_configured(
    config: Config, home: Path, shared: MCPTools | None = None, cwd: Path | None = None
) -> MCPTools | None:
    """The servers in `mcp_servers` (None when there are none: the SDK is never imported);
    with `shared`, the parent's servers instead of new ones. A server set to `sandbox:` runs
    in the sandbox `config` describes, with `cwd` as its workspace."""
    if shared is not None:
        return shared.shared()
    servers = parse_servers(config.mcp_servers)
    if not any(server.enabled for server in servers):
        return None
    folder = cwd or Path.cwd()
    sandbox = SandboxPolicy.from_config(config, folder)
    return MCPTools(MCPManager(servers, home, sandbox, folder), owned=True)
