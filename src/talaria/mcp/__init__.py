"""Model Context Protocol: use any MCP server's tools, and serve talaria as one.

Nothing here imports the `mcp` SDK at module level: it is loaded only when a server is
configured (`mcp_servers`), so `import talaria` and `Agent(...)` stay fast without one.
"""
