"""The built-in tools: terminal and process ("terminal"), the file tools ("file"), clarify."""

from __future__ import annotations

from talaria.tools.base import Tool


def builtin_tools() -> list[Tool]:
    """Every built-in tool in a fixed order (the prompt prefix must stay byte-stable)."""
    from talaria.tools.builtin.clarify import CLARIFY_TOOL
    from talaria.tools.builtin.files import FILE_TOOLS
    from talaria.tools.builtin.processes import PROCESS_TOOL
    from talaria.tools.builtin.terminal import TERMINAL_TOOL

    return [TERMINAL_TOOL, PROCESS_TOOL, *FILE_TOOLS, CLARIFY_TOOL]
