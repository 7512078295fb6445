"""`talaria mcp serve`: the agent itself as an MCP server over stdio.

Other agents and editors delegate to talaria through three tools: `run_task` (a new session),
`continue_session` and `list_sessions`. Each task runs on a fresh Agent bound to its session,
with the model options the server was started with. Nothing but the protocol goes to stdout.
Approvals follow the headless rule: no one can answer them here, so dangerous commands are
denied unless the server was started with `--yolo`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

AgentFactory = Callable[[str | None], Any]
"""Builds an Agent for a session id (None: a new session); ValueError for an unknown one."""

MAX_LISTED = 500
"""Most sessions one `list_sessions` call returns."""
_RESULT_KEYS = ("session_id", "final_response", "completed", "turn_exit_reason", "api_calls")


def build_server(make_agent: AgentFactory, list_sessions: Callable[[int], list[Any]]) -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    from talaria import __version__

    server = MCPServer(
        "talaria",
        version=__version__,
        log_level="WARNING",
        instructions=(
            "talaria is a coding agent with a terminal, files and memory. Give it a task with "
            "run_task; continue the same session with continue_session."
        ),
    )

    async def run(session_id: str | None, prompt: str) -> dict[str, Any]:
        try:
            agent = make_agent(session_id)
        except ValueError as exc:  # an unknown session, a bad configuration
            raise ToolError(str(exc)) from None
        try:
            result = await agent.arun_conversation(user_message=prompt)
        finally:
            await agent.aclose()
        answer = {key: result.get(key) for key in _RESULT_KEYS}
        if result.get("error"):
            answer["error"] = result["error"]
        return answer

    @server.tool()
    async def run_task(prompt: str) -> dict[str, Any]:
        """Run a task in a new talaria session; returns its session_id and final answer."""
        return await run(None, prompt)

    @server.tool()
    async def continue_session(session_id: str, prompt: str) -> dict[str, Any]:
        """Send a follow-up message to an existing session (by id or title, or 'latest')."""
        return await run(session_id, prompt)

    @server.tool(name="list_sessions", annotations=ToolAnnotations(read_only_hint=True))
    def recent_sessions(limit: int = 20) -> list[dict[str, Any]]:
        """The most recent sessions: id, title, source, message count, first message."""
        if not 1 <= limit <= MAX_LISTED:
            raise ToolError(f"limit must be from 1 to {MAX_LISTED}, got {limit}")
        return [
            {
                "session_id": info.id,
                "title": info.title,
                "source": info.source,
                "messages": info.message_count,
                "preview": info.preview,
            }
            for info in list_sessions(limit)
        ]

    return server


def serve_stdio(make_agent: AgentFactory, list_sessions: Callable[[int], list[Any]]) -> None:
    build_server(make_agent, list_sessions).run("stdio")
