"""A tiny MCP server (stdio) with one tool, for examples/mcp_tools.py."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("clock")


@server.tool()
def today() -> str:
    """Today's date (a fixed one, so that the example's output does not change)."""
    return "2026-12-02"


if __name__ == "__main__":
    server.run("stdio")
