"""The entry points of the installed distributions, read straight from their
`entry_points.txt` files.

`importlib.metadata` finds the same entries, but it imports `email`, `zipfile` and `csv` and
builds a Distribution per installed package on the way: `bench/first_request.py` measured it at
a sixth of a bare interpreter's start-up to its first request, on `http://` and `https://`
endpoints alike (docs/performance.md). This walks `sys.path` the way it does (`*.dist-info`
and `*.egg-info` folders in path order, one distribution per normalized name, the first one
found wins) and hands every case it does not cover (a zip archive or an `.egg` on the path, a
metadata name spelt in capitals, another finder of distributions on `sys.meta_path`) to
`importlib.metadata`. Nothing is cached between processes: the scan reads a few hundred small
files, which the same bench cannot tell from reading a cache.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from dataclasses import dataclass
from importlib import import_module
from typing import Any

_INFO_SUFFIXES = (".dist-info", ".egg-info")


@dataclass(frozen=True)
class EntryPoint:
    """One `name = value` line of a group; `load()` imports what the value names."""

    name: str
    value: str
    group: str

    def load(self) -> Any:
        """The module, or the object `module:attr.attr` names (importlib's syntax)."""
        match = _value_pattern().match(self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r}: malformed value {self.value!r}")
        module = import_module(match.group("module"))
        attrs = filter(None, (match.group("attr") or "").split("."))
        return functools.reduce(getattr, attrs, module)


class _NotCovered(Exception):
    """The path holds something only `importlib.metadata` reads right."""


def entry_points(group: str) -> list[EntryPoint]:
    """The group's entry points in the order `importlib.metadata.entry_points(group=...)`
    gives them."""
    try:
        if _other_distribution_finders():
            raise _NotCovered
        return [
            entry
            for info in _distribution_folders(sys.path)
            for entry in _parse(_read_entry_points(info), group)
        ]
    except _NotCovered:
        from importlib import metadata

        return [EntryPoint(e.name, e.value, e.group) for e in metadata.entry_points(group=group)]


def _distribution_folders(paths: list[str]) -> list[str]:
    """The metadata folders of the distributions that count: the first one of each name."""
    seen: set[str] = set()
    chosen = []
    for root in paths:
        for child in _children(root or "."):
            name = _distribution_name(child)
            if name is not None and name not in seen:
                seen.add(name)
                chosen.append(os.path.join(root, child))
    return chosen


def _children(root: str) -> list[str]:
    """The entries of a folder on the path ([] for one that does not exist, as importlib)."""
    if os.path.basename(root).lower().endswith(".egg"):
        raise _NotCovered  # an egg's metadata lives in its EGG-INFO folder
    try:
        return os.listdir(root)
    except NotADirectoryError:
        raise _NotCovered from None  # a zip archive on sys.path
    except OSError:
        return []


def _distribution_name(child: str) -> str | None:
    """The normalized distribution name of a metadata folder, None for anything else."""
    if not child.endswith(_INFO_SUFFIXES):
        if child.lower().endswith(_INFO_SUFFIXES):
            raise _NotCovered  # importlib takes such a name from the METADATA file instead
        return None
    name = child.rpartition(".")[0].partition("-")[0]
    return re.sub(r"[-_.]+", "_", name).lower()


def _read_entry_points(info: str) -> str:
    try:
        with open(os.path.join(info, "entry_points.txt"), encoding="utf-8") as file:
            return file.read()
    except (OSError, UnicodeDecodeError):
        return ""


def _parse(text: str, group: str) -> list[EntryPoint]:
    """The `name = value` lines under `[group]` (comments and blank lines skipped)."""
    if f"[{group}]" not in text:
        return []
    found = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section == group and "=" in line:
            name, value = line.split("=", 1)
            found.append(EntryPoint(name.strip(), value.strip(), group))
    return found


def _other_distribution_finders() -> bool:
    """Whether a finder besides the standard path finder can report distributions."""
    from importlib.machinery import PathFinder

    return any(
        finder is not PathFinder and hasattr(finder, "find_distributions")
        for finder in sys.meta_path
    )


@functools.cache
def _value_pattern() -> re.Pattern[str]:
    return re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")
