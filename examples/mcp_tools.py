"""MCP tools: the tools of any Model Context Protocol server, here a local stdio one.

Needs `pip install 'talaria[mcp]'`. The server's tools appear to the model as
`mcp__<server>__<tool>`; `approval: allow` lets them run without asking (the default, `ask`,
needs someone to answer approvals).

    python examples/mcp_tools.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from endpoint import endpoint

from talaria import Agent

server = Path(__file__).with_name("mcp_clock_server.py")
servers = {"clock": {"command": sys.executable, "args": [str(server)], "approval": "allow"}}

with Agent(**endpoint(), tools=[], mcp_servers=servers) as agent:
    print(agent.chat("What is today's date? Use the clock."))
