"""A small MCP server for the tests, built on the SDK's MCPServer (stdio).

`grow` adds a tool and announces the change the way the connection's protocol expects
(a `subscriptions/listen` event on 2026-07-28, `notifications/tools/list_changed` before).
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

server = MCPServer("talaria-test")


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool()
def shout(text: str) -> str:
    """Upper-case the text."""
    print(f"shouting {text}", file=sys.stderr)
    return text.upper()


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the reason."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `later` and announce that the tool list changed."""

    def later() -> str:
        """A tool that appeared after the start."""
        return "later works"

    server.add_tool(later)
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    return "grown"


@server.resource("test://greeting")
def greeting() -> str:
    """A greeting."""
    return "hello from a resource"


@server.prompt()
def review(topic: str) -> str:
    """Ask for a review of a topic."""
    return f"Please review {topic} carefully."


if __name__ == "__main__":
    server.run("stdio")
