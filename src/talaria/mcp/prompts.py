"""MCP server prompts in the chat: `/prompt` lists them, `/prompt server:name key=value ...`
fetches one and sends its text as the next message."""

from __future__ import annotations

import shlex
from typing import Any

from talaria.mcp.manager import MCPManager

_TIMEOUT = 60.0


class PromptError(Exception):
    """The prompt could not be used; the message says why."""


def prompt_listing(manager: MCPManager) -> list[str]:
    """One line per prompt: `server:name arg=... - description` (servers start if needed)."""
    manager.submit(manager.start_all()).result(_TIMEOUT)
    lines = []
    for connection in manager.connections.values():
        for prompt in connection.prompts:
            arguments = " ".join(
                f"{a.name}=…" if a.required else f"[{a.name}=…]" for a in prompt.arguments or []
            )
            about = f" - {prompt.description}" if prompt.description else ""
            lines.append(f"{connection.config.name}:{prompt.name} {arguments}".rstrip() + about)
    return lines


def prompt_text(manager: MCPManager, command: str) -> str:
    """The text of the prompt `server:name key=value ...` (quotes group words)."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise PromptError(f"cannot read the arguments: {exc}") from None
    server, sep, name = words[0].partition(":") if words else ("", "", "")
    if not sep or not name:
        raise PromptError("use /prompt server:name key=value ... (/prompt lists them)")
    arguments = {}
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if not eq:
            raise PromptError(f"argument {word!r} is not key=value")
        arguments[key] = value
    connection = manager.connections.get(server)
    if connection is None:
        raise PromptError(f"no MCP server named {server!r}")

    async def fetch(client: Any) -> Any:
        return await client.get_prompt(name, arguments)

    try:
        result = manager.submit(connection.call(fetch)).result(_TIMEOUT)
    except Exception as exc:
        raise PromptError(f"{server}:{name}: {exc}") from None
    return "\n\n".join(_message_text(message) for message in result.messages).strip()


def _message_text(message: Any) -> str:
    content = message.content
    text = getattr(content, "text", None)
    if text is not None:
        return str(text)
    resource = getattr(content, "resource", None)
    return str(getattr(resource, "text", "") or f"[{getattr(content, 'type', 'content')}]")
