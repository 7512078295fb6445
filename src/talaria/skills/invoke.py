"""`/<skill-name> [request]` from a front end (the CLI, ACP, the web page): the skill's
instructions become the user message, with the request after them."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from talaria.skills.catalog import Skill

_INVOCATION = re.compile(r"^/([a-z0-9][a-z0-9-]*)(?:\s+(.*))?$", re.DOTALL)


def invocation_message(skill: Skill, request: str) -> str:
    """The user message that runs `skill` on `request`."""
    try:
        body = skill.path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError as exc:
        raise ValueError(f"skill {skill.name} cannot be read: {exc.strerror}") from None
    lines = [
        f"[The user invoked the skill /{skill.name}. Its instructions follow (SKILL.md in "
        f"{skill.folder}; read the files beside it with skill_view when they are needed).]",
        "",
        body,
    ]
    if request.strip():
        lines += ["", f"The user's request: {request.strip()}"]
    return "\n".join(lines)


def with_skill(text: str, skills: Callable[[], Sequence[Skill]]) -> str:
    """`text`, or the skill's instructions and the request when it is `/<skill-name> ...`."""
    return expand_invocation(text, skills) or text


def expand_invocation(text: str, skills: Callable[[], Sequence[Skill]]) -> str | None:
    """The user message for `text` when it is `/<skill-name> ...` and `skills()` (looked at
    only then) has that skill; None otherwise."""
    match = _INVOCATION.match(text.strip())
    if match is None:
        return None
    skill = next((s for s in skills() if s.name == match.group(1)), None)
    return invocation_message(skill, match.group(2) or "") if skill is not None else None
