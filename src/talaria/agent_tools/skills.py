"""`skill_view` and `skill_manage`: the model loads a skill's instructions when a task calls
for them (progressive disclosure: the prompt lists only names and descriptions), and writes
its own skills into the home's `skills/` folder.

`skill_manage` writes outside the workspace, so it goes through the write boundary like
`write_file` (`Tool.writes` names the file; `talaria.tools.write_boundary` judges it): with a
sandbox that confines, each write is an approval request, refused when approvals are off.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from talaria.skills.catalog import NAME, Skill, SkillCatalog, split_front_matter
from talaria.tools.base import Tool, ToolContext, ToolError
from talaria.tools.write_boundary import check_write

if TYPE_CHECKING:
    from talaria.agent_tools.services import AgentServices

LISTED_FILES = 100
"""Files beside a SKILL.md that `skill_view` names (the rest are counted)."""
ACTIONS = ("create", "edit", "patch", "write_file", "remove_file", "delete")


def catalog_of(ctx: ToolContext[AgentServices]) -> SkillCatalog:
    catalog = ctx.services.skills
    if catalog is None:
        raise ToolError("skills are not available to this agent")
    return catalog


def _named(catalog: SkillCatalog, name: str) -> Skill:
    skill = catalog.get(name)
    if skill is None:
        known = ", ".join(s.name for s in catalog.skills()) or "none"
        raise ToolError(f"no skill is named {name!r}. Available skills: {known}.")
    return skill


def _inside(folder: Path, relative: str) -> Path:
    """`relative` within the skill's folder; never a path that leaves it."""
    target = Path(os.path.normpath(folder / relative))
    if Path(relative).is_absolute() or not target.is_relative_to(folder) or target == folder:
        raise ToolError(f"file_path must be a file inside the skill's folder, not {relative!r}")
    return target


def _files_beside(folder: Path) -> list[str]:
    files: list[str] = []
    for parent, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = Path(parent) / name
            if path != folder / "SKILL.md" and not name.startswith("."):
                files.append(str(path.relative_to(folder)))
    return files


def skill_view(ctx: ToolContext[AgentServices], name: str = "", file_path: str = "") -> str:
    catalog = catalog_of(ctx)
    if not name:
        skills = catalog.skills()
        if not skills:
            return "No skills are installed."
        return "\n".join(f"- {s.name} ({s.source}): {s.description}" for s in skills)
    skill = _named(catalog, name)
    if file_path:
        target = _inside(skill.folder, file_path)
        try:
            return target.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise ToolError(f"{file_path} of skill {name} cannot be read: {exc.strerror}") from None
    try:
        text = skill.path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ToolError(f"skill {name} cannot be read: {exc.strerror}") from None
    files = _files_beside(skill.folder)
    footer = [f"\n[Skill folder: {skill.folder}]"]
    if files:
        shown = files[:LISTED_FILES]
        more = f" (and {len(files) - len(shown)} more)" if len(files) > len(shown) else ""
        footer.append(
            f"Files beside it{more}; read one with skill_view(name, file_path), or run "
            "scripts from the folder:\n" + "\n".join(f"- {f}" for f in shown)
        )
    return text.rstrip("\n") + "\n" + "\n".join(footer)


def manage_target(arguments: dict[str, Any], cwd: Path, home: Path) -> Path | None:
    """The file (or, for delete, the folder) a `skill_manage` call changes, for the write
    boundary to judge before it runs."""
    name = str(arguments.get("name", ""))
    if not NAME.match(name):
        return None
    folder = home / "skills" / name
    if arguments.get("action") == "delete":
        return folder
    relative = str(arguments.get("file_path") or "SKILL.md")
    return Path(os.path.normpath(folder / relative))


def _check_skill_text(name: str, content: str) -> None:
    meta, _ = split_front_matter(content)
    if not meta.get("description") or str(meta.get("name", name)) != name:
        raise ToolError(
            "SKILL.md must start with front matter naming the skill and saying when to use it:"
            f"\n---\nname: {name}\ndescription: what it does and when to use it\n---"
        )
    from talaria.prompt.injection import scan_secrets, scan_text

    findings = scan_text(content) + scan_secrets(content)
    if findings:
        raise ToolError(
            "refused: skills are offered to every future session, and this text looks "
            "unsafe: " + "; ".join(findings)
        )


def _write(target: Path, ctx: ToolContext[AgentServices], data: str) -> None:
    from talaria.tools.builtin.files import write_checked

    write_checked(target, ctx, lambda _: data.encode("utf-8"))


def _patch_text(target: Path, old: str, new: str) -> str:
    try:
        text = target.read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"{target} cannot be read: {exc.strerror}") from None
    count = text.count(old) if old else 0
    if count != 1:
        found = "not found" if count == 0 else f"found {count} times; quote more of it"
        raise ToolError(f"old_string was {found} in {target.name}")
    return text.replace(old, new, 1)


def skill_manage(
    ctx: ToolContext[AgentServices],
    action: str,
    name: str,
    content: str = "",
    old_string: str = "",
    new_string: str = "",
    file_path: str = "",
) -> str:
    if not NAME.match(name):
        raise ToolError("name must be lower-case letters, digits and hyphens (at most 64)")
    folder = ctx.home / "skills" / name
    skill_file = folder / "SKILL.md"
    exists = skill_file.is_file()
    if action != "create" and not exists:
        raise ToolError(f"the home has no skill named {name!r}; create it first")
    if action == "create" and exists:
        raise ToolError(f"skill {name!r} exists; edit or patch it")
    target = _inside(folder, file_path) if file_path else skill_file
    if action in ("create", "edit"):
        _check_skill_text(name, content)
        _write(skill_file, ctx, content)
        return f"{'Created' if action == 'create' else 'Rewrote'} skill {name} ({skill_file})."
    if action == "patch":
        updated = _patch_text(target, old_string, new_string)
        if target == skill_file:
            _check_skill_text(name, updated)
        _write(target, ctx, updated)
        return f"Patched {target.relative_to(folder)} of skill {name}."
    if action == "write_file":
        if not file_path or target == skill_file:
            raise ToolError("write_file needs a file_path other than SKILL.md (use edit)")
        _write(target, ctx, content)
        return f"Wrote {file_path} in skill {name}."
    real = Path(os.path.realpath(folder if action == "delete" else target))
    check_write(real, ctx)
    if action == "delete":
        import shutil  # only to delete a skill (start-up does without it)

        shutil.rmtree(real)
        return f"Deleted skill {name}."
    if target == skill_file or not target.is_file():
        raise ToolError(f"{file_path or 'SKILL.md'} is not a removable file of skill {name}")
    real.unlink()
    return f"Removed {file_path} from skill {name}."


SKILL_VIEW_TOOL = Tool(
    name="skill_view",
    description=(
        "Load a skill: its instructions (SKILL.md) and the files beside it. Call it before a "
        "task that a listed skill covers, then follow what it says. With file_path, one of "
        "the skill's other files; without a name, every installed skill."
    ),
    parameters={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "the skill's name"},
            "file_path": {
                "type": "string",
                "description": "a file inside the skill's folder, relative to it",
            },
        },
        "additionalProperties": False,
    },
    handler=skill_view,
    toolset="skills",
    context_param="ctx",
    retry_safe=True,
)

SKILL_MANAGE_TOOL = Tool(
    name="skill_manage",
    description=(
        "Create and edit your own skills (folders in the talaria home's skills/), to keep a "
        "procedure that worked for next time. create/edit: content is the whole SKILL.md, "
        "starting with front matter (---, name: <name>, description: what it does and when "
        "to use it, ---) then the instructions. patch: replace old_string with new_string "
        "in SKILL.md or file_path. write_file/remove_file: a file beside SKILL.md "
        "(file_path). delete: the whole skill. The user may be asked to approve each write."
    ),
    parameters={
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS)},
            "name": {"type": "string", "description": "the skill's name (a-z, 0-9, -)"},
            "content": {"type": "string", "description": "create/edit/write_file: the text"},
            "old_string": {"type": "string", "description": "patch: the exact text to replace"},
            "new_string": {"type": "string", "description": "patch: its replacement"},
            "file_path": {
                "type": "string",
                "description": "a file inside the skill's folder, relative to it",
            },
        },
        "required": ["action", "name"],
        "additionalProperties": False,
    },
    handler=skill_manage,
    toolset="skills",
    context_param="ctx",
    writes=manage_target,
)
