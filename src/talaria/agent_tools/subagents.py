"""Named sub-agents: Markdown definitions that `delegate_task` offers the model by name.

A definition is `agents/<name>.md`: front matter says who the agent is and what it may use,
the body is its system prompt. They are read from the talaria home (`agents/`) and the project
(`.claude/agents/`, then `.talaria/agents/`), a later folder's definition replacing an earlier
one of the same name, so Claude Code's agent files work as they are. Front matter keys:

- `name` (default: the file name), `description` (what the model reads to choose it);
- `tools` (Claude Code's comma list or a YAML list of tool or toolset names; Claude Code's tool
  names such as `Read` or `Bash` are mapped to talaria's) and/or `toolsets`;
- `model` (`inherit`, or a model id on the parent's provider), `max_iterations`;
- `approvals`: `ask` (the default: its approval requests go to the user of the root agent) or
  `deny` (nobody is asked: what needs a yes is refused). A definition never turns approvals
  off: a file in a project folder must not lift the user's safety rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from talaria.agent_tools.catalog import TOOLSETS
from talaria.claude_names import CLAUDE_ONLY, talaria_tool
from talaria.skills.catalog import split_front_matter

AGENT_FOLDERS = (".claude/agents", ".talaria/agents")
"""Project folders read for definitions, in order (later wins)."""
CHILD_TOOLSETS = ("terminal", "file", "todo", "session_search")
"""What an inline sub-agent (no definition) works with."""
NOT_FOR_CHILDREN = frozenset({"delegation", "memory"})
"""A sub-agent delegates no further and leaves the user's memory alone."""
APPROVAL_MODES = ("ask", "deny")
INHERIT_MODELS = frozenset({"inherit", "sonnet", "opus", "haiku"})
"""Claude Code's model aliases name its own models: a definition with one uses the parent's."""


@dataclass(frozen=True, slots=True)
class SubagentDefinition:
    """One named sub-agent, as its file describes it."""

    name: str
    description: str
    prompt: str
    toolsets: tuple[str, ...] = CHILD_TOOLSETS
    """The built-in toolsets it is offered (those of the tools it names included)."""
    tools: frozenset[str] | None = None
    """When set, only these tools of those toolsets (None: all of them)."""
    model: str | None = None
    """None: the parent's model."""
    max_iterations: int | None = None
    """None: `delegation.max_iterations`."""
    approvals: str = "ask"
    path: Path | None = None


@dataclass(frozen=True, slots=True)
class Definitions:
    """The definitions found, by name, and what could not be read (one line per problem)."""

    agents: Mapping[str, SubagentDefinition]
    problems: tuple[str, ...] = ()


def load_definitions(
    home: Path, cwd: Path, toolset_of: Callable[[], Mapping[str, str]]
) -> Definitions:
    """Every definition in the home's and the project's agent folders; `toolset_of` gives each
    built-in tool name's toolset, asked only when there is a definition (it loads every
    toolset)."""
    agents: dict[str, SubagentDefinition] = {}
    problems: list[str] = []
    paths = [
        path
        for folder in (home / "agents", *(cwd / name for name in AGENT_FOLDERS))
        for path in (sorted(folder.glob("*.md")) if folder.is_dir() else ())
    ]
    names = toolset_of() if paths else {}
    for path in paths:
        try:
            definition = parse_definition(path.read_text(encoding="utf-8"), path, names)
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: {exc}")
            continue
        agents[definition.name] = definition
    return Definitions(agents, tuple(problems))


def parse_definition(text: str, path: Path, toolset_of: Mapping[str, str]) -> SubagentDefinition:
    """The definition in `text` (ValueError saying what is wrong)."""
    meta, body = split_front_matter(text.lstrip("\ufeff"))
    name = str(meta.get("name") or path.stem).strip()
    if not name or any(ch.isspace() for ch in name):
        raise ValueError(f"name {name!r} must be one word")
    description = str(meta.get("description") or "").strip()
    if not description:
        raise ValueError("front matter has no description (the model chooses by it)")
    toolsets, tools = _tool_choice(meta.get("toolsets"), meta.get("tools"), toolset_of)
    model = str(meta.get("model") or "").strip() or None
    raw = meta.get("approvals", "ask")
    approvals = ("on" if raw else "off") if isinstance(raw, bool) else str(raw).strip().lower()
    if approvals not in APPROVAL_MODES:
        raise ValueError(f"approvals must be one of {', '.join(APPROVAL_MODES)}")
    return SubagentDefinition(
        name=name,
        description=" ".join(description.split()),
        prompt=body.strip(),
        toolsets=toolsets,
        tools=tools,
        model=None if model is None or model.lower() in INHERIT_MODELS else model,
        max_iterations=_positive(meta.get("max_iterations", meta.get("maxTurns"))),
        approvals=approvals,
        path=path,
    )


def _tool_choice(
    toolsets: Any, tools: Any, toolset_of: Mapping[str, str]
) -> tuple[tuple[str, ...], frozenset[str] | None]:
    """(toolsets, only these tools or None) for the `toolsets` and `tools` keys."""
    if toolsets is None and tools is None:
        return CHILD_TOOLSETS, None
    chosen = set(_names(toolsets))
    named: set[str] = set()
    for entry in _names(tools):
        if entry in TOOLSETS:
            chosen.add(entry)
            continue
        if entry in CLAUDE_ONLY:
            continue
        counterpart = talaria_tool(entry)
        if counterpart is not None and toolset_of.get(counterpart) in NOT_FOR_CHILDREN:
            continue  # Claude Code's `Task` in its agent files: a sub-agent delegates no further
        tool = counterpart or entry
        if tool not in toolset_of and not tool.startswith("mcp__"):
            raise ValueError(f"unknown tool {entry!r}")
        named.add(tool)
    unknown = chosen - set(TOOLSETS)
    if unknown:
        raise ValueError(f"unknown toolset(s) {', '.join(sorted(unknown))}")
    refused = (chosen | {toolset_of.get(t, "") for t in named}) & NOT_FOR_CHILDREN
    if refused:
        raise ValueError(f"a sub-agent cannot have {', '.join(sorted(refused))}")
    whole = tuple(name for name in TOOLSETS if name in chosen)
    if not named:
        return whole, None
    every = {tool for tool, toolset in toolset_of.items() if toolset in chosen} | named
    needed = chosen | {toolset_of[t] for t in named if t in toolset_of}
    return tuple(name for name in TOOLSETS if name in needed), frozenset(every)


def _names(value: Any) -> list[str]:
    """A YAML list or a comma-separated string, as names."""
    if value is None:
        return []
    if isinstance(value, str):
        items: Iterable[Any] = value.split(",")
    elif isinstance(value, list | tuple):
        items = value
    else:
        raise ValueError(f"expected a list of names, got {value!r}")
    return [str(item).strip() for item in items if str(item).strip()]


def _positive(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_iterations must be a positive integer, got {value!r}")
    return value
