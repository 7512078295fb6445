"""Git metadata in the writable roots: found once when the session's first command runs (the
sandbox mounts it read-only), and watched for what later commands create.

bubblewrap can only mount over what exists, so a command can still make a new `.git`
(`git init`, `git clone`, `cp -r .git sub/.git` with a fresh `config`), whose hooks and config
the user's own git would then run outside any sandbox. After every sandboxed command the
directories seen so far are checked for a change (their mtime and link count, one `stat`
each); only changed ones are listed again, and new directories walked. New git metadata that a
sandboxed command made is renamed aside (`<name>.blocked-by-talaria`), and the model is told
how to ask for it instead (an escalated command, which the user approves). What an approved
escalated command created is kept, and protected from the next command on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from talaria.tools.protected_paths import SCAN_LIMIT, git_shaped

BLOCKED = ".blocked-by-talaria"
_SKIP = frozenset(
    {
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        "site-packages",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)
"""Dependency trees and caches: thousands of directories nobody runs git in, skipped so that
the look after each command stays a few `stat` calls."""


def _state(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return info.st_mtime_ns, info.st_nlink


class GitWatch:
    """The git metadata of a session's writable roots, and the directories watched for more."""

    def __init__(self, roots: list[Path], limit: int = SCAN_LIMIT) -> None:
        self.limit = limit
        self.seen: dict[str, tuple[int, int]] = {}
        self.known: set[Path] = set()
        for root in roots:
            self.known.update(self._walk(root))

    def _walk(self, root: Path) -> Iterator[Path]:
        """Git metadata below `root`, recording each directory visited (no links followed)."""
        pending = [root]
        while pending and len(self.seen) < self.limit:
            folder = pending.pop()
            state = _state(str(folder))
            if state is None:
                continue
            self.seen[str(folder)] = state
            if git_shaped(folder):
                yield folder
                continue
            yield from self._entries(folder, pending)

    def _entries(self, folder: Path, pending: list[Path]) -> Iterator[Path]:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            if entry.name == ".git":
                yield Path(entry.path)
                yield from pointed_at(Path(entry.path))
            elif (
                entry.is_dir(follow_symlinks=False)
                and entry.name not in _SKIP
                and entry.path not in self.seen
            ):
                pending.append(Path(entry.path))

    def changes(self) -> list[Path]:
        """Git metadata that appeared since the last look (changed directories only)."""
        found: list[Path] = []
        for folder, before in list(self.seen.items()):
            now = _state(folder)
            if now is None:
                del self.seen[folder]
                continue
            if now == before:
                continue
            self.seen[folder] = now
            if git_shaped(Path(folder)):
                found.append(Path(folder))
                continue
            pending: list[Path] = []
            found += self._entries(Path(folder), pending)
            for new in pending:
                found += self._walk(new)
        return [path for path in dict.fromkeys(found) if path not in self.known]

    def block_new(self) -> list[Path]:
        """Rename aside what a sandboxed command created; the new names."""
        moved = []
        for path in self.changes():
            target = path / "HEAD" if path.name != ".git" and path.is_dir() else path
            aside = target.with_name(target.name + BLOCKED)
            try:
                os.rename(target, aside)
            except OSError:
                continue
            moved.append(aside)
        return moved

    def accept_new(self) -> list[Path]:
        """Keep what an approved escalated command created, as known metadata."""
        new = self.changes()
        self.known.update(new)
        return new


def pointed_at(dot_git: Path) -> Iterator[Path]:
    """The git directory a `.git` file names (`gitdir: ...`) and its `commondir`."""
    if dot_git.is_symlink() or not dot_git.is_file():
        return
    try:
        line = dot_git.read_text(errors="replace").strip()
    except OSError:
        return
    if not line.startswith("gitdir:"):
        return
    gitdir = dot_git.parent / line.removeprefix("gitdir:").strip()
    yield gitdir
    try:
        common = (gitdir / "commondir").read_text(errors="replace").strip()
    except OSError:
        return
    yield gitdir / common
