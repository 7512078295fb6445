"""The skills index the model reads: names and descriptions, within a budget.

Stable prefix (docs/architecture.md): the index is part of the system prompt a session stores,
so it never changes inside a session. When the skills on disk differ from what that prompt
lists (another process wrote one, `skill_manage` made one), each request of the next turns
carries the difference in its newest message, like the other volatile notes.
"""

from __future__ import annotations

from collections.abc import Sequence

from talaria.skills.catalog import Skill

HEADING = "# Skills"
INTRO = (
    "Skills are instructions for particular tasks. When a task matches a skill's description, "
    "load it with `skill_view(name)` first and follow it."
)
IN_USE = "# Skill in use: "
"""The heading of a skill named at start-up, given whole (`--skill`, `Agent(skills=[...])`)."""
ENTRY_LIMIT = 250
"""Characters of one description in the index (the whole of it is in the SKILL.md)."""


def in_use(name: str, instructions: str) -> str:
    """A skill named at start-up, as the model reads it."""
    return f"{IN_USE}{name}\n{instructions.strip()}"


def _entry(skill: Skill) -> str:
    description = skill.description
    if len(description) > ENTRY_LIMIT:
        description = description[: ENTRY_LIMIT - 1] + "…"
    return f"- {skill.name}: {description}" if description else f"- {skill.name}"


def listed(skills: Sequence[Skill], budget: int) -> list[str]:
    """The index entries that fit in `budget` characters, in name order."""
    entries: list[str] = []
    used = 0
    for skill in skills:
        entry = _entry(skill)
        used += len(entry) + 1
        if used > budget:
            break
        entries.append(entry)
    return entries


def skills_index(skills: Sequence[Skill], budget: int) -> str:
    """The section for the system prompt ('' without skills)."""
    entries = listed(skills, budget)
    if not entries:
        return ""
    more = len(skills) - len(entries)
    tail = [f"- … and {more} more: `skill_view()` without a name lists them all"] if more else []
    return "\n".join([HEADING, INTRO, *entries, *tail])


def entries_in(prompt: str | None) -> list[str]:
    """The index entries a stored system prompt lists."""
    if not prompt or f"{HEADING}\n{INTRO}\n" not in prompt:
        return []
    section = prompt.split(f"{HEADING}\n{INTRO}\n", 1)[1].split("\n\n", 1)[0]
    return [line for line in section.splitlines() if line.startswith("- ") and "… and" not in line]


def changes_note(skills: Sequence[Skill], budget: int, prompt: str | None) -> str | None:
    """What changed since the session's prompt listed its skills, for the newest message of
    each request (None: nothing did)."""
    now = listed(skills, budget)
    before = entries_in(prompt)
    added = [entry for entry in now if entry not in before]
    names_now = {entry[2:].split(":", 1)[0] for entry in now}
    gone = [
        name for name in (entry[2:].split(":", 1)[0] for entry in before) if name not in names_now
    ]
    if not added and not gone:
        return None
    lines = ["[The skills changed since this session began; use this list over the prompt's.]"]
    if added:
        lines += ["New or changed skills (load with `skill_view(name)`):", *added]
    if gone:
        lines.append(f"No longer available: {', '.join(gone)}")
    return "\n".join(lines)
