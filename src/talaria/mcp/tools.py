"""MCP server tools as talaria `Tool`s, plus one tool to list and read servers' resources.

Each server tool becomes `mcp__<server>__<tool>` with a schema all three wire APIs accept and
an async handler that crosses to the manager's loop. Failures are tool errors the model can
read: the server's own `isError`, a timeout, a crashed server (restarted on the next call).
Approval follows the server's `approval:` setting through the Tool's own assessor, so the
executor asks exactly as it does for a dangerous command.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from talaria.mcp.config import ServerConfig
from talaria.mcp.connection import ServerConnection, ServerUnavailable, describe_error
from talaria.mcp.limits import cut_description, description_text
from talaria.mcp.manager import MCPManager
from talaria.mcp.names import assign_names
from talaria.mcp.results import render_contents, render_result
from talaria.mcp.schema import normalise_schema
from talaria.policy.approval import Assessment
from talaria.tools.base import Tool, ToolError

TOOLSET = "mcp"
RESOURCES_TOOL = "mcp_resources"
_ARGUMENT_PREVIEW = 300


def offered_tools(
    manager: MCPManager, taken: Iterable[str] = ()
) -> list[tuple[ServerConnection, Any, str]]:
    """(connection, server tool, name the model sees) for every tool `tools:` and the caps
    (`limits`) let through."""
    offered = [
        (connection, remote)
        for connection in manager.connections.values()
        for remote in connection.offer.tools
    ]
    names = assign_names(((c.config.name, r.name) for c, r in offered), taken)
    return [(c, r, name) for (c, r), name in zip(offered, names, strict=True)]


def build_tools(manager: MCPManager, taken: Iterable[str] = ()) -> list[Tool]:
    """Every offered tool of every server that has listed its tools, in config order."""
    tools = [_adapt(manager, c, r, name) for c, r, name in offered_tools(manager, taken)]
    if any(c.offers_resources for c in manager.connections.values()):
        tools.append(_resources_tool(manager))
    return tools


def _adapt(manager: MCPManager, connection: ServerConnection, remote: Any, name: str) -> Tool:
    config = connection.config
    remote_name = remote.name

    async def call(**arguments: Any) -> str:
        async def invoke(client: Any) -> Any:
            return await client.call_tool(remote_name, arguments)

        result = await _on_server(manager, connection, invoke)
        rendered = render_result(result, manager.media_dir)
        if rendered.is_error:
            raise ToolError(rendered.text or f"{remote_name} reported an error")
        return rendered.text

    read_only = bool(getattr(remote.annotations, "read_only_hint", False))
    return Tool(
        name=name,
        description=_description(config, remote),
        parameters=normalise_schema(remote.input_schema),
        handler=call,
        toolset=TOOLSET,
        timeout=config.timeout + 5,
        assess=_assessor(config, remote_name, name, read_only),
    )


async def _on_server(
    manager: MCPManager, connection: ServerConnection, invoke: Callable[[Any], Any]
) -> Any:
    """Run one request on the server, turning every failure into a readable ToolError."""
    server, timeout = connection.config.name, connection.config.timeout

    async def bounded() -> Any:
        return await asyncio.wait_for(connection.call(invoke), timeout)

    try:
        return await manager.run(bounded())
    except TimeoutError:
        raise ToolError(f"MCP server {server!r} did not answer within {timeout:g} s") from None
    except ServerUnavailable as exc:
        raise ToolError(
            f"MCP server {server!r} is unavailable: {exc}. It is restarted on the next call."
        ) from None
    except ToolError:
        raise
    except Exception as exc:
        raise ToolError(f"MCP server {server!r}: {describe_error(exc)}") from None


def _description(config: ServerConfig, remote: Any) -> str:
    text = cut_description(description_text(remote), config.max_description_chars)
    return f"{text}\n(Tool {remote.name!r} of the MCP server {config.name!r}.)"


def _assessor(
    config: ServerConfig, remote_name: str, name: str, read_only: bool
) -> Callable[[dict[str, Any], Path, Path], Assessment | None] | None:
    if config.approval == "allow" or (read_only and config.allow_read_only):
        return None

    def assess(arguments: dict[str, Any], cwd: Path, home: Path) -> Assessment:
        shown = json.dumps(arguments, ensure_ascii=False)
        if len(shown) > _ARGUMENT_PREVIEW:
            shown = shown[:_ARGUMENT_PREVIEW] + "..."
        # The command is the tool's name, so a session or always grant covers the tool
        # (as in Claude Code), and `command_allowlist` may list `mcp__server__*`.
        return Assessment(
            command=name,
            reason=f"MCP server {config.name!r} runs {remote_name!r} with {shown}",
            pattern=name,
        )

    return assess


def _resources_tool(manager: MCPManager) -> Tool:
    async def resources(action: str, server: str | None = None, uri: str | None = None) -> str:
        if action == "list":
            return await _list_resources(manager, server)
        if action == "read":
            if not server or not uri:
                raise ToolError("'read' needs both 'server' and 'uri' (from action 'list')")
            return await _read_resource(manager, _connection(manager, server), uri)
        raise ToolError(f"unknown action {action!r}; use 'list' or 'read'")

    return Tool(
        name=RESOURCES_TOOL,
        description=(
            "List or read the resources (documents, files, data) that connected MCP servers "
            "offer. Use action 'list' (optionally for one server), then 'read' with the "
            "server and uri it gave."
        ),
        parameters={
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["list", "read"]},
                "server": {"type": "string", "description": "The MCP server's name."},
                "uri": {"type": "string", "description": "The resource's uri (for 'read')."},
            },
            "required": ["action"],
        },
        handler=resources,
        toolset=TOOLSET,
    )


def _connection(manager: MCPManager, server: str) -> ServerConnection:
    connection = manager.connections.get(server)
    if connection is None or not connection.offers_resources:
        known = [n for n, c in manager.connections.items() if c.offers_resources]
        raise ToolError(f"no MCP server {server!r} with resources; known: {', '.join(known)}")
    return connection


async def _list_resources(manager: MCPManager, server: str | None) -> str:
    chosen = (
        [_connection(manager, server)]
        if server
        else [c for c in manager.connections.values() if c.offers_resources and c.status == "ready"]
    )
    lines = []
    for connection in chosen:

        async def fetch(client: Any) -> Any:
            return await client.list_resources()

        listing = await _on_server(manager, connection, fetch)
        for item in listing.resources:
            about = f" - {item.description}" if item.description else ""
            lines.append(f"{connection.config.name}\t{item.uri}\t{item.name}{about}")
    return "\n".join(lines) or "No resources."


async def _read_resource(manager: MCPManager, connection: ServerConnection, uri: str) -> str:
    async def fetch(client: Any) -> Any:
        return await client.read_resource(uri)

    result = await _on_server(manager, connection, fetch)
    return render_contents(result.contents, manager.media_dir)
