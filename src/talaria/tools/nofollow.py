"""Read and replace a file without following a link that could change between a check and
the write.

The file tools judge the real path they are about to write, and must then write exactly
there: a symlink flipped by a background command in between must not move the write (into
`~/.ssh/authorized_keys`, say). So the directory is opened one component at a time from `/`,
each relative to the one before and with O_NOFOLLOW; the new content goes to a temp file
created (O_EXCL) in that directory and is renamed into place relative to the same
descriptor. The path that was judged is the path that was walked; nothing resolves it again.
A link found where a directory was judged fails the write instead of being followed.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from talaria.tools.base import ToolError

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LINKED = (errno.ELOOP, errno.ENOTDIR)


def _changed(path: Path) -> ToolError:
    return ToolError(
        f"{path} was not written: a part of the path is (or just became) a symbolic link, so "
        "where the write would land changed after it was checked"
    )


@contextmanager
def directory(real: Path, create: bool = False) -> Iterator[int]:
    """A descriptor of the directory `real` (an absolute path without links), opened one
    component at a time without following links; missing directories are made when `create`."""
    fd = os.open("/", _DIRECTORY)
    try:
        for part in real.parts[1:]:
            child = _open_directory(fd, part, real, create)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _open_directory(parent: int, name: str, real: Path, create: bool) -> int:
    try:
        return os.open(name, _DIRECTORY, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            raise ToolError(f"the directory {real} does not exist") from None
    except OSError as exc:
        if exc.errno in _LINKED:
            raise _changed(real) from None
        raise
    with suppress(FileExistsError):
        os.mkdir(name, 0o777, dir_fd=parent)
    return _open_directory(parent, name, real, create=False)


def read(parent: int, name: str, shown: Path) -> bytes | None:
    """The bytes of the regular file `name` in `parent` (None when there is none)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in _LINKED:
            raise _changed(shown) from None
        raise
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError(f"{shown} is not a regular file")
        return handle.read()


def existing_mode(parent: int, name: str, shown: Path) -> int | None:
    """The permission bits of `name` in `parent`, None when it does not exist yet."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{shown} is a directory")
    return stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else None


def replace(parent: int, name: str, data: bytes, shown: Path) -> bool:
    """Write `data` as `name` in `parent` through a temp file and a rename in the same
    directory (readers never see half a file, an existing file keeps its permissions, a link
    at `name` is replaced rather than followed). True when a file was there before."""
    mode = existing_mode(parent, name, shown)
    temp = f".{name}.{os.urandom(4).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, 0o600 if mode is not None else 0o666, dir_fd=parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.rename(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with suppress(OSError):
            os.unlink(temp, dir_fd=parent)
        raise
    return mode is not None
