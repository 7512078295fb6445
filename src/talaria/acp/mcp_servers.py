"""The editor's `mcpServers` (from `session/new` and `session/load`) as `mcp_servers` entries.

They run through talaria's own MCP client for that session alone: started at its first turn,
their tools offered like configured ones (and asked about the same way), stopped when the
session closes. An editor server named like a configured one replaces it for the session.
"""

from __future__ import annotations

from typing import Any

from acp.schema import HttpMcpServer, McpServerStdio, SseMcpServer

from talaria.acp.errors import invalid
from talaria.config import ConfigError

TRANSPORTS = ("stdio", "http", "sse")
"""What `initialize` advertises: stdio always, and `mcpCapabilities` http and sse."""


def editor_servers(servers: list[Any] | None) -> dict[str, dict[str, Any]]:
    """The ACP server descriptions as `mcp_servers` entries; a bad one is one clear error."""
    from talaria.mcp.config import parse_servers

    entries: dict[str, dict[str, Any]] = {}
    for server in servers or []:
        name = str(getattr(server, "name", "") or "").strip()
        if not name:
            raise invalid("mcpServers: every server needs a name")
        if name in entries:
            raise invalid(f"mcpServers: two servers are named {name!r}")
        entries[name] = _entry(name, server)
    try:
        parse_servers(entries)
    except ConfigError as exc:
        raise invalid(f"mcpServers: {exc}") from None
    return entries


def _entry(name: str, server: Any) -> dict[str, Any]:
    if isinstance(server, McpServerStdio):
        return {
            "command": server.command,
            "args": list(server.args),
            "env": {variable.name: variable.value for variable in server.env},
        }
    if isinstance(server, HttpMcpServer | SseMcpServer):
        return {
            "type": server.type,
            "url": server.url,
            "headers": {header.name: header.value for header in server.headers},
        }
    kind = getattr(server, "type", type(server).__name__)
    raise invalid(
        f"mcpServers: {name!r} uses transport {kind!r}; talaria connects {', '.join(TRANSPORTS)}"
    )
