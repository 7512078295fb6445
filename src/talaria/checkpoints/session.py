"""Checkpoints of one session: a snapshot of every writable root per turn, rewind, and diff.

What the agent changed is what changed *during* its turns (and rewinds): a change made
between two turns is the user's. Within a turn, a snapshot before each step whose tools could
write marks a point a rewind can also go back to (files only). A rewind to turn N restores
only paths the agent changed since N, and of those only the ones still as the agent left
them (the user's later edits stay, and are reported). Files over the size cap and ignored
folders are in no snapshot, so a restore never deletes or rewrites them; it says which paths
it left alone.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from talaria.checkpoints import restore
from talaria.checkpoints.journal import Checkpoint, Journal, Step
from talaria.checkpoints.shadow import CheckpointError, Entry, ShadowRepo


@dataclass(frozen=True, slots=True)
class TurnSummary:
    """One checkpoint as a front end lists it."""

    id: int
    kind: str
    label: str
    at: float
    changed: tuple[str, ...]
    """Paths the agent changed during it."""
    dropped: bool
    steps: tuple[str, ...] = ()
    """The tools of each step that could write, in order (step 1 is the first)."""


@dataclass(frozen=True, slots=True)
class RewindReport:
    """What a rewind did, and what it left as it was."""

    turn: int
    restored: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    """Paths the user changed by hand since the agent's last checkpoint of them: left alone."""
    left_alone: tuple[str, ...] = ()
    """Paths in no snapshot (over the size cap, ignored) or unsafe to write: left alone."""
    conversation: bool = False
    undo: int | None = None
    """The checkpoint to rewind to for undoing this (the files as they were before it)."""
    step: int | None = None
    """The step of the turn rewound to before (None: the turn's start)."""

    def summary(self) -> str:
        at = f"step {self.step} of turn {self.turn}" if self.step else f"turn {self.turn}"
        lines = [f"rewound to before {at}"]
        if self.conversation:
            lines.append("· the conversation continues from before that turn")
        lines.append(f"· {len(self.restored)} file(s) restored")
        lines += [f"  {path}" for path in self.restored]
        if self.kept:
            lines.append(f"· {len(self.kept)} file(s) you edited since are kept as you left them")
            lines += [f"  {path}" for path in self.kept]
        if self.left_alone:
            lines.append(
                f"· {len(self.left_alone)} file(s) left alone (over the size cap, ignored, "
                "or outside the workspace now)"
            )
            lines += [f"  {path}" for path in self.left_alone]
        if self.undo is not None:
            lines.append(f"· to undo this, rewind the files to checkpoint {self.undo}")
        return "\n".join(lines)


class SessionCheckpoints:
    """The checkpoints of one session, kept in `directory` (see `storage.session_dir`)."""

    def __init__(
        self,
        directory: Path,
        roots: Sequence[Path],
        *,
        enabled: bool,
        max_file_bytes: int,
        exclude: Sequence[Path] = (),
    ) -> None:
        self.directory = directory
        self.roots = [Path(os.path.realpath(root)) for root in roots]
        self.skipped = [root for root in self.roots if _too_wide(root)]
        """Roots never snapshotted: the file system's root or the home directory."""
        self.exclude = [Path(os.path.realpath(path)) for path in (*exclude, directory)]
        self.enabled = enabled
        self.max_file_bytes = max_file_bytes
        self.journal = Journal(directory / "journal.json")
        self._current: Checkpoint | None = None

    # ---- recording ----------------------------------------------------------------------

    def begin_turn(self, seq: int, prompt: str) -> Checkpoint:
        """Snapshot the roots as the turn starts (the user's changes since the last turn are in
        this snapshot, not in the turn's changes)."""
        trees, over = self._snapshot_all()
        entry = self.journal.add("turn", _one_line(prompt), seq, trees)
        entry.over_cap = over
        self.journal.save()
        self._current = entry
        return entry

    def before_step(self, label: str) -> None:
        """Snapshot before a step of the turn whose tools could write (`label` names them):
        what changed since the last snapshot (the step before, a background process, an MCP
        server) is recorded, and a rewind can go back to this point. The shadow index is the
        stat cache, so when nothing changed this is a walk of the folders that stores nothing."""
        entry = self._current
        if entry is None:
            return
        trees, _ = self._snapshot_all()
        entry.steps.append(Step(label, trees))
        self.journal.save()

    def end_turn(self) -> None:
        entry, self._current = self._current, None
        if entry is None:
            return
        entry.end, _ = self._snapshot_all()
        self.journal.save()

    # ---- reading ------------------------------------------------------------------------

    def turns(self) -> list[TurnSummary]:
        out = []
        for entry in self.journal.entries:
            end = self.journal.end_of(entry) or {}
            changed: list[str] = []
            for root, start in entry.start.items():
                if root in end:
                    repo = self._repo(Path(root))
                    changed += [self._shown(root, p) for p in repo.changes(start, end[root])]
            out.append(
                TurnSummary(
                    entry.id, entry.kind, entry.label, entry.at, tuple(changed), entry.dropped,
                    tuple(step.label for step in entry.steps),
                )
            )  # fmt: skip
        return out

    def diff(self, since: int | None = None) -> str:
        """What the agent changed since checkpoint `since` (the whole session: None), as a
        unified diff from then to now."""
        entries = self.journal.entries
        if not entries:
            return ""
        first = self.journal.get(since) if since is not None else entries[0]
        now, _ = self._snapshot_all()
        parts = []
        for root, start in first.start.items():
            if root not in now:
                continue
            touched = self._touched(root, first.id)
            prefix = self._shown(root, "")
            repo = self._repo(Path(root))
            parts.append(repo.patch(start, now[root], sorted(touched), prefix))
        return "".join(parts)

    # ---- rewinding ----------------------------------------------------------------------

    def rewind(
        self, turn: int, *, files: bool, conversation: bool, step: int | None = None
    ) -> RewindReport:
        """Restore the files to what they were when `turn` began, or before its step `step`
        (after snapshotting them as they are now, so this can be undone); `conversation` only
        marks the later turns' messages as dropped (the caller truncates the history)."""
        target = self.journal.get(turn)
        if step is not None:
            return self._restore(target, False, self._step_of(target, step, files, conversation))
        if conversation and (target.kind != "turn" or target.dropped):
            raise ValueError(
                f"checkpoint {turn} has no conversation to go back to"
                + (" (its messages were already rewound away)" if target.dropped else "")
            )
        report = RewindReport(turn, conversation=conversation)
        if files:
            if not self.enabled:
                raise ValueError("file checkpoints are turned off (checkpoints.enabled: false)")
            report = self._restore(target, conversation)
        if conversation:
            for entry in self.journal.since(turn):
                entry.dropped = entry.kind == "turn" or entry.dropped
            self.journal.save()
        return report

    def _step_of(self, target: Checkpoint, step: int, files: bool, conversation: bool) -> int:
        if conversation or not files:
            raise ValueError("a step is rewound in its files only (conversation=False)")
        if not self.enabled:
            raise ValueError("file checkpoints are turned off (checkpoints.enabled: false)")
        if not 1 <= step <= len(target.steps):
            raise KeyError(
                f"checkpoint {target.id} has no step {step} (it has {len(target.steps)})"
            )
        return step

    def _restore(
        self, target: Checkpoint, conversation: bool, step: int | None = None
    ) -> RewindReport:
        later_ids = [entry.id for entry in self.journal.since(target.id)]
        begin = target.steps[step - 1].trees if step else target.start
        now, _ = self._snapshot_all()
        where = f"step {step} of turn {target.id}" if step else f"turn {target.id}"
        undo = self.journal.add("rewind", f"before rewind to {where}", -1, now)
        restored: list[str] = []
        kept: list[str] = []
        left: list[str] = []
        for root, start in begin.items():
            if root not in now:
                continue
            repo = self._repo(Path(root))
            last = self._touched(root, target.id, upto=later_ids, first=start)
            over = set((target.over_cap or {}).get(root, ()))
            writes: dict[str, Entry] = {}
            for path, (was, current) in repo.changes(start, now[root]).items():
                if path not in last:
                    continue  # changed by the user, not the agent
                shown = self._shown(root, path)
                if current != last[path]:
                    kept.append(shown)
                elif path in over or (current is None and os.path.lexists(Path(root) / path)):
                    left.append(shown)
                elif was is None:
                    (restored if restore.remove(Path(root), path) else left).append(shown)
                else:
                    writes[path] = was
            contents = repo.blobs(entry.blob for entry in writes.values())
            for path, entry in writes.items():
                done = restore.write(Path(root), path, entry, contents[entry.blob])
                (restored if done else left).append(self._shown(root, path))
        undo.end, _ = self._snapshot_all()
        self.journal.save()
        return RewindReport(
            target.id,
            tuple(sorted(restored)),
            tuple(sorted(kept)),
            tuple(sorted(left)),
            conversation,
            undo.id,
            step,
        )

    def _touched(
        self,
        root: str,
        since: int,
        upto: Sequence[int] | None = None,
        first: str | None = None,
    ) -> dict[str, Entry | None]:
        """Each path the agent changed in checkpoint `since` (from tree `first` on, when
        given) or later -> the entry it left (the agent's last checkpoint of that path)."""
        repo = self._repo(Path(root))
        last: dict[str, Entry | None] = {}
        for entry in self.journal.since(since):
            if upto is not None and entry.id not in upto:
                continue
            end = self.journal.end_of(entry)
            if end is None or root not in end or root not in entry.start:
                continue
            begin = first if first is not None and entry.id == since else entry.start[root]
            for path, (_, new) in repo.changes(begin, end[root]).items():
                last[path] = new
        return last

    # ---- parts --------------------------------------------------------------------------

    def _snapshot_all(self) -> tuple[dict[str, str], dict[str, list[str]]]:
        trees: dict[str, str] = {}
        over: dict[str, list[str]] = {}
        if not self.enabled:
            return trees, over
        for root in self.roots:
            if not root.is_dir() or root in self.skipped:
                continue
            shot = self._repo(root).snapshot(self.max_file_bytes)
            trees[str(root)] = shot.tree
            if shot.over_cap:
                over[str(root)] = list(shot.over_cap)
        return trees, over

    def _repo(self, root: Path) -> ShadowRepo:
        key = hashlib.sha256(os.fsencode(root)).hexdigest()[:16]
        inside = [path.relative_to(root) for path in self.exclude if path.is_relative_to(root)]
        return ShadowRepo(root, self.directory / "roots" / key, [str(p) for p in inside])

    def _shown(self, root: str, path: str) -> str:
        return path if self.roots and root == str(self.roots[0]) else str(Path(root) / path)


def _too_wide(root: Path) -> bool:
    """Would snapshotting `root` mean copying a whole system or home directory?"""
    return root == Path(root.anchor) or root == Path(os.path.realpath(Path.home()))


def _one_line(text: str, limit: int = 80) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


__all__ = ["CheckpointError", "RewindReport", "SessionCheckpoints", "TurnSummary"]
