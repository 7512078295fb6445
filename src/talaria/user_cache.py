"""Files talaria derives from what is installed, kept from one process to the next.

They live in ``$TALARIA_CACHE_DIR``, else ``$XDG_CACHE_HOME/talaria``, else
``~/.cache/talaria``. They are only caches: a file that cannot be read, or holds something
else, reads as absent, and one that cannot be written is not (a read-only home, a full disk,
Temporal's workflow sandbox, which forbids `open`).
A file is replaced whole, never written in place, so a reader never sees half of one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from pathlib import Path
from typing import Any

from talaria import fastjson

log = logging.getLogger("talaria")


def cache_dir() -> Path:
    own = os.environ.get("TALARIA_CACHE_DIR")
    if own:
        return Path(own).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg or Path.home() / ".cache").expanduser() / "talaria"


MAX_BYTES = 4 * 1024 * 1024
"""A larger file is not what talaria writes (a few KB): it reads as absent."""


def read(name: str) -> dict[str, Any] | None:
    """The JSON object stored under `name`, None without one."""
    path = cache_dir() / name
    try:
        stored = fastjson.loads(path.read_bytes()) if path.stat().st_size <= MAX_BYTES else None
    except Exception:  # best effort: a full disk, bad JSON, a sandbox that forbids files
        return None
    return stored if isinstance(stored, dict) else None


def write(name: str, data: dict[str, Any]) -> None:
    """Store `data` under `name`, replacing what was there."""
    path = cache_dir() / name
    partial = path.with_name(f"{name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(fastjson.dumpb(data))
        os.replace(partial, path)
    except Exception as error:  # best effort, as reading is
        log.debug("not cached in %s: %s", path, error)
        with contextlib.suppress(Exception):
            partial.unlink(missing_ok=True)
