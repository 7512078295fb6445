"""The session's list of checkpoints, one JSON file next to the shadow repositories.

An entry is a turn (or a rewind): the trees of every writable root when it started, before
each of its steps that could write, and when it ended, and where the turn's messages start in
the store, so a rewind can drop them.
Entry ids count up and are never reused, so "turn 3" names the same moment after a rewind.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(slots=True)
class Checkpoint:
    """One turn (kind "turn") or one rewind (kind "rewind") of the session."""

    id: int
    kind: str
    label: str
    seq: int
    """The store sequence number of the turn's first message (-1 for a rewind)."""
    at: float
    start: dict[str, str]
    """Root (absolute path) -> tree id when the entry began."""
    end: dict[str, str] | None = None
    over_cap: dict[str, list[str]] | None = None
    """Root -> files left out of the start snapshot (over `checkpoints.max_file_bytes`)."""
    dropped: bool = False
    """The turn's messages were rewound away (its files can still be restored)."""
    steps: list[Step] = field(default_factory=list)
    """Before each step of the turn whose tools could write: the tools, and the trees."""


@dataclass(slots=True)
class Step:
    """The trees before one step of a turn (its tools named in `label`)."""

    label: str
    trees: dict[str, str]


class Journal:
    """The entries of one session, saved atomically after every change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[Checkpoint] = []
        if path.exists():
            data = json.loads(path.read_text())
            self.entries = [_entry(item) for item in data.get("entries", [])]

    def add(self, kind: str, label: str, seq: int, start: dict[str, str]) -> Checkpoint:
        entry = Checkpoint(
            id=(self.entries[-1].id + 1) if self.entries else 1,
            kind=kind,
            label=label,
            seq=seq,
            at=time.time(),
            start=start,
        )
        self.entries.append(entry)
        self.save()
        return entry

    def get(self, entry_id: int) -> Checkpoint:
        for entry in self.entries:
            if entry.id == entry_id:
                return entry
        known = ", ".join(str(entry.id) for entry in self.entries) or "none yet"
        raise KeyError(f"no checkpoint {entry_id} in this session (there are: {known})")

    def since(self, entry_id: int) -> list[Checkpoint]:
        return [entry for entry in self.entries if entry.id >= entry_id]

    def end_of(self, entry: Checkpoint) -> dict[str, str] | None:
        """The trees when `entry` ended; for one that never recorded its end (the process
        died mid-turn), the start of the next entry, or else the snapshot before its last
        step (what the steps before that did is known)."""
        if entry.end is not None:
            return entry.end
        later = [other for other in self.entries if other.id > entry.id]
        if later:
            return later[0].start
        return entry.steps[-1].trees if entry.steps else None

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"entries": [asdict(e) for e in self.entries]}))
        os.replace(temporary, self.path)


def _entry(item: dict[str, Any]) -> Checkpoint:
    """An entry as the file holds it (a journal written before steps were kept has none)."""
    steps = item.pop("steps", None) or []
    return Checkpoint(**item, steps=[Step(**step) for step in steps])
