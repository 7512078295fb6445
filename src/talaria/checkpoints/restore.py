"""Writing snapshotted content back into a root, without ever leaving it.

A path is written only when its parent directory, resolved now, is still inside the root: a
command that replaced a folder with a link (to the home, say) between the snapshot and the
restore cannot make the restore write through it. Files are replaced atomically (a temporary
file in the same folder, then `os.replace`), with the executable bit the snapshot recorded.
"""

from __future__ import annotations

import os
from pathlib import Path

from talaria.checkpoints.shadow import Entry


def inside(root: Path, path: Path) -> bool:
    """Is the parent of `path`, with every link resolved, the real `root` or below it?"""
    real_root = os.path.realpath(root)
    parent = os.path.realpath(path.parent)
    return parent == real_root or parent.startswith(real_root.rstrip(os.sep) + os.sep)


def remove(root: Path, relative: str) -> bool:
    """Delete one file or link, then the folders that this left empty (up to the root)."""
    path = root / relative
    if not inside(root, path):
        return False
    try:
        if path.is_dir() and not path.is_symlink():
            return False
        path.unlink()
    except FileNotFoundError:
        pass
    folder = path.parent
    while folder != root and inside(root, folder):
        try:
            folder.rmdir()
        except OSError:
            break
        folder = folder.parent
    return True


def write(root: Path, relative: str, entry: Entry, content: bytes) -> bool:
    """Put `content` at `relative` as the snapshot had it (file, executable file or link)."""
    path = root / relative
    if entry.mode == "160000":
        return False  # an embedded repository: never written
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    if not inside(root, path) or (path.is_dir() and not path.is_symlink()):
        return False
    if entry.mode == "120000":
        if path.is_symlink() or path.exists():
            path.unlink()
        os.symlink(os.fsdecode(content), path)
        return True
    import tempfile  # with random and shutil: only when a restore writes

    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".talaria-restore-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(content)
        os.chmod(temporary, _mode(path, executable=entry.mode == "100755"))
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return True


def _mode(path: Path, *, executable: bool) -> int:
    """The file's permissions as they are now (0o644 for a new one), with the executable
    bits the snapshot recorded."""
    try:
        mode = os.lstat(path).st_mode & 0o7777 if not path.is_symlink() else 0o644
    except FileNotFoundError:
        mode = 0o644
    if executable:
        return mode | ((mode & 0o444) >> 2)
    return mode & ~0o111
