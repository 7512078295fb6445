"""Where skills are found, and what each one is.

Folders, first found wins on a name: the project's `.talaria/skills/`, `.claude/skills/` and
`.agents/skills/` (the folders other agents use), the home's `skills/`, then folders plugins
register. Each skill is a subfolder holding a `SKILL.md`. Headers are read once per file
version (size and mtime), so looking again each turn costs a few `stat` calls.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

PROJECT_FOLDERS = (".talaria/skills", ".claude/skills", ".agents/skills")
DESCRIPTION_LIMIT = 1024
"""The Agent Skills format caps `description` at 1024 characters."""
NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
"""Lower-case letters, digits and hyphens, at most 64 characters (the format's rule)."""


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill folder: the name and description its SKILL.md declares, and where it is."""

    name: str
    description: str
    path: Path
    """The SKILL.md file."""
    source: str
    """Where it was found: "project", "home" or "plugin"."""

    @property
    def folder(self) -> Path:
        return self.path.parent


def skill_roots(home: Path, cwd: Path, extra: Iterable[Path] = ()) -> list[tuple[Path, str]]:
    """The folders skills are looked for in, in precedence order, with their source."""
    project = [(cwd / folder, "project") for folder in PROJECT_FOLDERS]
    return [*project, (home / "skills", "home"), *((Path(p), "plugin") for p in extra)]


class SkillCatalog:
    """The skills of one agent's folders, found again on each `skills()` call. `scan` finds
    prompt injection in a description (a project's skills come with its repository, and
    descriptions go into the system prompt): a flagged one is withheld, with a note why."""

    def __init__(
        self,
        roots: Sequence[tuple[Path, str]],
        scan: Callable[[str], list[str]] | None = None,
    ) -> None:
        self.roots = list(roots)
        self.scan = scan
        self._headers: dict[Path, tuple[tuple[int, int], tuple[str, str]]] = {}

    def skills(self) -> list[Skill]:
        """Every skill, sorted by name (the first folder that has a name wins it)."""
        found: dict[str, Skill] = {}
        for root, source in self.roots:
            for path in _skill_files(root):
                header = self._header(path)
                if header is None:
                    continue
                name, description = header
                found.setdefault(name, Skill(name, description, path, source))
        return [found[name] for name in sorted(found)]

    def get(self, name: str) -> Skill | None:
        return next((skill for skill in self.skills() if skill.name == name), None)

    def _header(self, path: Path) -> tuple[str, str] | None:
        try:
            stat = path.stat()
        except OSError:
            return None
        version = (stat.st_size, stat.st_mtime_ns)
        cached = self._headers.get(path)
        if cached is not None and cached[0] == version:
            return cached[1]
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        name, description = skill_header(text, path.parent.name)
        if self.scan is not None and self.scan(description):
            description = "[description withheld: it looks like prompt injection]"
        header = (name, description)
        self._headers[path] = (version, header)
        return header


def _skill_files(root: Path) -> list[Path]:
    try:
        entries = sorted(os.scandir(root), key=lambda entry: entry.name)
    except OSError:
        return []
    files = (Path(entry.path) / "SKILL.md" for entry in entries if entry.is_dir())
    return [path for path in files if path.is_file()]


def split_front_matter(text: str) -> tuple[dict[str, object], str]:
    """(front matter, body) of a Markdown file that may start with a `---` YAML block. Such
    files come with any repository talaria runs in, so a front matter too deep or too large
    once its aliases are expanded counts as none, as `config.yaml` is refused."""
    if not text.startswith("---"):
        return {}, text
    head, sep, body = text[3:].partition("\n---")
    if not sep:
        return {}, text
    import yaml

    from talaria.config import MAX_CONFIG_DEPTH, MAX_CONFIG_NODES, expanded_size

    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError:
        data = _loose_front_matter(head)
    except RecursionError:  # nested past what the parser can walk: no usable front matter
        data = None
    if expanded_size(data, MAX_CONFIG_NODES, MAX_CONFIG_DEPTH) > MAX_CONFIG_NODES:
        data = None  # aliases that expand without end ("billion laughs"): read, it would hang
    return (data if isinstance(data, dict) else {}), body.split("\n", 1)[1] if "\n" in body else ""


def _loose_front_matter(head: str) -> dict[str, object]:
    """`key: value` lines, for front matter that is not valid YAML (an unquoted colon in a
    description is common in skills written by hand)."""
    data: dict[str, object] = {}
    for line in head.splitlines():
        key, colon, value = line.partition(":")
        if colon and key.strip() and not key.startswith((" ", "\t")):
            data[key.strip()] = value.strip()
    return data


def skill_header(text: str, folder_name: str) -> tuple[str, str]:
    """(name, description) of a SKILL.md: the front matter's, else the folder's name and the
    first line of text."""
    meta, body = split_front_matter(text)
    name = str(meta.get("name") or folder_name).strip()
    description = " ".join(str(meta.get("description") or "").split())
    if not description:
        first = next((ln.strip("# ").strip() for ln in body.splitlines() if ln.strip("-# ")), "")
        description = first
    return name, description[:DESCRIPTION_LIMIT]
