"""The system prompt, built once per session and stored with it (prompt-cache stability).

Layers, in order: identity (`SOUL.md` in the home, else the default), tool-use guidance for the
tools present, the memory snapshot, the skills index (and the skills named at start-up, whole),
the project's context file, and the
environment (date, platform, working directory). Anything read from disk is scanned for prompt
injection and cut head+tail, so one odd file cannot take over or flood the prompt.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from talaria.skills.catalog import Skill

DEFAULT_IDENTITY = (
    "You are talaria, a capable assistant and coding agent. You work in the user's environment "
    "through the tools you are given. Be direct and accurate; prefer doing over describing. "
    "When a task is done, say briefly what you did and what is left."
)

CONTEXT_FILES = (".talaria.md", "AGENTS.md", "CLAUDE.md", ".cursorrules")
CONTEXT_FILE_LIMIT = 20_000

_TOOL_GUIDANCE: dict[str, str] = {
    "terminal": "Use `terminal` to run shell commands; prefer non-interactive flags. Dangerous "
    "commands need the user's approval and may be denied.",
    "read_file": "Read files with `read_file` before editing them.",
    "patch": "Edit files with `patch` (exact string replacement) rather than rewriting them.",
    "search_files": "Find code with `search_files` instead of listing directories by hand.",
    "todo": "For multi-step work keep a plan with `todo` and update it as you go.",
    "memory": "Save durable facts about the user or the environment with `memory`; keep entries "
    "short. Memory changes show up in the next session.",
    "session_search": "Use `session_search` to recall earlier conversations.",
    "delegate_task": "Delegate independent sub-tasks with `delegate_task`; children see only the "
    "goal and context you give them.",
    "clarify": "Ask with `clarify` only when you cannot proceed without the user's answer.",
}


@dataclass(frozen=True)
class PromptInputs:
    """What the system prompt is built from."""

    home: Path
    cwd: Path
    tool_names: Iterable[str]
    memory_snapshot: str = ""
    now: Callable[[], datetime] = datetime.now
    skills: Sequence[Skill] = ()
    """The skills found for this agent (`talaria.skills.catalog`), listed by name."""
    skills_budget: int = 0
    """Characters the skills index may take (`skills.index_chars`)."""
    active_skills: Sequence[tuple[str, str]] = ()
    """(name, instructions) of the skills named at start-up, given whole."""
    lean: bool = False
    """The lean profile (small windows): short identity, the project file cut short, no tool
    guidance, memory or skills index."""
    notes: Sequence[str] = ()
    """The front end's own lines (`AgentSpec.prompt_notes`), last."""


def build_system_prompt(inputs: PromptInputs) -> str:
    if inputs.lean:
        return _lean_prompt(inputs)
    sections = [
        _identity(inputs.home),
        _tool_guidance(inputs.tool_names),
        inputs.memory_snapshot.strip(),
        *_skills_sections(inputs),
        _context_file(inputs.cwd),
        _environment(inputs),
        *inputs.notes,
    ]
    return "\n\n".join(section for section in sections if section)


def _lean_prompt(inputs: PromptInputs) -> str:
    from talaria.prompt.profile import LEAN_CONTEXT_FILE_LIMIT, LEAN_IDENTITY

    context = _cut(_context_file(inputs.cwd), LEAN_CONTEXT_FILE_LIMIT)
    sections = (
        LEAN_IDENTITY,
        *_active_skills(inputs),
        context,
        _environment(inputs),
        *inputs.notes,
    )
    return "\n\n".join(s for s in sections if s)


def _identity(home: Path) -> str:
    soul = _read_guarded(home / "SOUL.md", "SOUL.md")
    return soul or DEFAULT_IDENTITY


def _tool_guidance(tool_names: Iterable[str]) -> str:
    lines = [_TOOL_GUIDANCE[name] for name in tool_names if name in _TOOL_GUIDANCE]
    return "# Tools\n" + "\n".join(f"- {line}" for line in lines) if lines else ""


def _skills_sections(inputs: PromptInputs) -> list[str]:
    """The skills index (with `skill_view` to load them) and the skills named at start-up,
    whole (`--skill`, `Agent(skills=[...])`)."""
    from talaria.skills.index import skills_index

    offered = "skill_view" in list(inputs.tool_names)
    index = skills_index(inputs.skills, inputs.skills_budget) if offered else ""
    return [index, *_active_skills(inputs)]


def _active_skills(inputs: PromptInputs) -> list[str]:
    from talaria.skills.index import in_use

    return [in_use(name, body) for name, body in inputs.active_skills]


def _context_file(cwd: Path) -> str:
    for name in CONTEXT_FILES:
        text = _read_guarded(cwd / name, name)
        if text:
            return f"# Project context ({name})\n{text}"
    return ""


def _read_guarded(path: Path, label: str) -> str:
    """File text, or a visible note when it looks like prompt injection; cut head+tail."""
    try:
        if not path.is_file():
            return ""
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    from talaria.prompt.injection import scan_text

    findings = scan_text(text)
    if findings:
        return f"[{label} was blocked: it looks like prompt injection ({'; '.join(findings)}).]"
    return _cut(text, CONTEXT_FILE_LIMIT)


def _platform() -> str:
    """The system and its release, as `platform` says them (it costs 4 ms of imports, and
    `os.uname` says the same wherever it exists)."""
    if not hasattr(os, "uname"):  # Windows
        import platform

        return f"{platform.system()} {platform.release()}".strip()
    uname = os.uname()
    return f"{uname.sysname} {uname.release}"


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n[... {omitted} characters omitted ...]\n{text[-half:]}"


def _environment(inputs: PromptInputs) -> str:
    system = _platform()
    return (
        "# Environment\n"
        f"- Date: {inputs.now().strftime('%A, %Y-%m-%d')}\n"
        f"- Platform: {system}\n"
        f"- Working directory: {inputs.cwd}"
    )
