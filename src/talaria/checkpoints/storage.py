"""Where checkpoints live, and how they are cleaned up.

Each session's checkpoints are one folder, `<talaria home>/checkpoints/<session id>/`: deleting
the session deletes it, and `prune` removes the folders of sessions idle longer than
`checkpoints.max_age_days` and then the oldest ones while all of them together are over
`checkpoints.max_total_mb` (never the folder of the session at hand).
"""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def checkpoints_root(home: Path) -> Path:
    return home / "checkpoints"


def session_dir(home: Path, session_id: str) -> Path:
    """The folder of one session's checkpoints (an id unfit for a file name is hashed)."""
    name = session_id
    if not _SAFE_NAME.fullmatch(session_id):
        name = "h-" + hashlib.sha256(session_id.encode()).hexdigest()[:32]
    return checkpoints_root(home) / name


def remove_session(home: Path, session_id: str) -> None:
    """Delete a session's checkpoints (with the session)."""
    _remove_tree(session_dir(home, session_id))


def prune(home: Path, *, max_age_days: float, max_total_mb: float, keep: str) -> list[str]:
    """Remove old checkpoint folders, then the oldest while over the budget; their names."""
    base = checkpoints_root(home)
    if not base.is_dir():
        return []
    kept = session_dir(home, keep)
    folders = []
    for folder in base.iterdir():
        if folder.is_dir() and folder != kept:
            journal = folder / "journal.json"
            used = (journal if journal.exists() else folder).stat().st_mtime
            folders.append((used, folder))
    folders.sort()
    removed: list[str] = []
    cutoff = time.time() - max_age_days * 86400
    total = _size(kept) + sum(_size(folder) for _, folder in folders)
    budget = max_total_mb * 1024 * 1024
    for used, folder in folders:
        if used >= cutoff and total <= budget:
            break
        size = _size(folder)
        _remove_tree(folder)
        total -= size
        removed.append(folder.name)
    return removed


def _size(folder: Path) -> int:
    if not folder.is_dir():
        return 0
    return sum(f.lstat().st_size for f in folder.rglob("*") if f.is_file())


def _remove_tree(folder: Path) -> None:
    import shutil  # only when there is something to delete

    shutil.rmtree(folder, ignore_errors=True)
