"""Claude Code's names for talaria's tools, in one table.

Hook matchers (`Bash`, `Edit|Write`) and sub-agent definitions (`tools: Read, Grep`) written
for Claude Code use its names; both read them from here, so the two agree.
"""

from __future__ import annotations

from collections.abc import Mapping

CLAUDE_NAMES: Mapping[str, tuple[str, ...]] = {
    "terminal": ("Bash",),
    "read_file": ("Read",),
    "write_file": ("Write",),
    "patch": ("Edit", "MultiEdit"),
    "search_files": ("Grep", "Glob", "LS"),
    "web_fetch": ("WebFetch",),
    "web_search": ("WebSearch",),
    "delegate_task": ("Task",),
    "todo": ("TodoWrite",),
}
"""talaria's tool -> the Claude Code tools it stands for."""

CLAUDE_ONLY = frozenset({"NotebookEdit", "NotebookRead", "BashOutput", "KillShell"})
"""Claude Code tools talaria has no counterpart for."""

_TALARIA_TOOL = {claude: tool for tool, names in CLAUDE_NAMES.items() for claude in names}


def talaria_tool(claude_name: str) -> str | None:
    """The talaria tool a Claude Code tool name stands for (None: not one of its names)."""
    return _TALARIA_TOOL.get(claude_name)
