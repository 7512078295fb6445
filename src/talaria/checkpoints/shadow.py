"""A shadow git repository for one writable root: snapshots of its content as git trees.

The repository lives outside the workspace (under the talaria home) and is driven with
`GIT_DIR` + `GIT_WORK_TREE`, so the user's own `.git` is never read or written. Its index is
the stat cache: `ls-files -m -d -o` names only what changed since the last snapshot, and only
those files are read and hashed. No global or system git configuration is read (a user's
hooks, filters or fsmonitor never run), and `info/attributes` turns off every content
conversion, so a restore writes back exactly the bytes that were snapshotted.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""git's id of the tree with nothing in it (what a root with no tracked files snapshots to)."""

DEFAULT_IGNORES = (
    ".git/",
    "node_modules/",
    ".venv/",
    "venv/",
    "__pycache__/",
    ".mypy_cache/",
    ".pytest_cache/",
    ".ruff_cache/",
    ".tox/",
    ".nox/",
)
"""Folders never snapshotted (besides what the workspace's `.gitignore` files ignore)."""

_CONFIG = {
    "core.autocrlf": "false",
    "core.safecrlf": "false",
    "core.symlinks": "true",
    "core.filemode": "true",
    "core.fsmonitor": "false",
    "core.untrackedCache": "true",
    "core.quotePath": "false",
    "core.excludesFile": os.devnull,
    "core.hooksPath": os.devnull,
    "gc.auto": "0",
    "advice.addEmbeddedRepo": "false",
    "safe.directory": "*",
}


PACK_AT = 256
"""From this many new or changed files on, a snapshot stores them as one pack."""


class CheckpointError(RuntimeError):
    """A snapshot or a restore could not be done (git missing or failing); says why."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One path of a tree: its git mode ("100644", "100755", "120000", "160000") and blob."""

    mode: str
    blob: str


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A tree id, and the files left out of it because they were over the size cap."""

    tree: str
    over_cap: tuple[str, ...] = ()


class ShadowRepo:
    """Snapshots of `root` kept in the git directory `git_dir`."""

    def __init__(self, root: Path, git_dir: Path, exclude: Sequence[str] = ()) -> None:
        """`exclude`: folders inside `root` never to snapshot (relative: the talaria home)."""
        self.root = root
        self.git_dir = git_dir
        self.exclude = exclude
        env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
        env.update(
            GIT_DIR=str(git_dir),
            GIT_WORK_TREE=str(root),
            GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_TERMINAL_PROMPT="0",
            GIT_LITERAL_PATHSPECS="1",
            GIT_OPTIONAL_LOCKS="0",
            LC_ALL="C",
        )
        self._env = env

    def _git(self, *args: str, data: bytes | None = None, init: bool = False) -> bytes:
        env = self._env
        if init:  # git refuses a work tree before the repository exists
            env = {k: v for k, v in env.items() if k not in ("GIT_DIR", "GIT_WORK_TREE")}
        try:
            done = subprocess.run(
                _argv(*args),
                input=data,
                capture_output=True,
                env=env,
                cwd=self.root,
                check=False,
            )
        except FileNotFoundError as exc:
            raise CheckpointError("checkpoints need git, which is not installed") from exc
        if done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip().splitlines()
            raise CheckpointError(f"git {args[0]} failed: {why[-1] if why else done.returncode}")
        return done.stdout

    def ensure(self) -> None:
        """Create the shadow repository the first time (idempotent)."""
        if (self.git_dir / "HEAD").exists():
            return
        self.git_dir.parent.mkdir(parents=True, exist_ok=True)
        # No template: git's sample hooks and description are 18 files per session that
        # nothing here reads.
        self._git("init", "-q", "--bare", "--template=", str(self.git_dir), init=True)
        info = self.git_dir / "info"
        info.mkdir(exist_ok=True)
        own = ["/" + _literal(path) + "/" for path in self.exclude if path not in ("", ".")]
        (info / "exclude").write_text("\n".join((*DEFAULT_IGNORES, *own)) + "\n")
        (info / "attributes").write_text("* -text -ident -filter -working-tree-encoding\n")

    def snapshot(self, max_file_bytes: int) -> Snapshot:
        """Bring the index up to the root's content and write it as a tree; files over
        `max_file_bytes` and embedded repositories stay out (and out of the index)."""
        self.ensure()
        listed = self._git("ls-files", "-z", "-m", "-d", "-o", "--exclude-standard")
        update: list[str] = []
        drop: list[str] = []
        over: list[str] = []
        for path in _split(listed):
            if path.endswith("/"):
                continue  # an embedded repository: its own git keeps it
            try:
                info = None if _beyond_link(self.root, path) else os.lstat(self.root / path)
            except OSError:
                info = None
            if info is None:
                drop.append(path)  # gone (or now behind a link): out of the index
            elif stat.S_ISREG(info.st_mode) and info.st_size > max_file_bytes:
                over.append(path)
                drop.append(path)
            elif stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
                update.append(path)
        if drop:
            self._git("update-index", "--force-remove", "-z", "--stdin", data=_join(drop))
        if len(update) >= PACK_AT:
            self._pack(update)
        if update:
            self._git("update-index", "--add", "--replace", "-z", "--stdin", data=_join(update))
        tree = self._git("write-tree").decode().strip()
        return Snapshot(tree, tuple(sorted(set(over))))

    def _pack(self, paths: Sequence[str]) -> None:
        """Store many files' content as one pack (`git fast-import`) before the index takes
        them: one loose object per file costs a file creation each, which for a first
        snapshot of a large workspace is most of its time. The index then finds each object
        stored and only hashes the file."""
        process = subprocess.Popen(
            _argv("fast-import", "--quiet"),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=self._env,
            cwd=self.root,
        )
        assert process.stdin is not None
        with process.stdin as feed:
            for path in paths:
                target = self.root / path
                if target.is_symlink():
                    continue
                try:
                    data = target.read_bytes()
                except OSError:
                    continue  # gone or unreadable: update-index reports it or drops it
                feed.write(b"blob\ndata %d\n" % len(data))
                feed.write(data)
                feed.write(b"\n")
        if process.wait() != 0:
            raise CheckpointError(f"git fast-import failed (exit {process.returncode})")

    def changes(self, old: str, new: str) -> dict[str, tuple[Entry | None, Entry | None]]:
        """Every path whose entry differs between two trees: (old entry, new entry)."""
        if old == new:
            return {}
        raw = self._git("diff-tree", "-r", "-z", "--no-renames", "--raw", old, new)
        out: dict[str, tuple[Entry | None, Entry | None]] = {}
        items = _split(raw)
        for header, path in zip(items[::2], items[1::2], strict=True):
            old_mode, new_mode, old_blob, new_blob, _ = header.lstrip(":").split(" ")
            out[path] = (_entry(old_mode, old_blob), _entry(new_mode, new_blob))
        return out

    def blobs(self, ids: Iterable[str]) -> dict[str, bytes]:
        """The content of each blob, read in one `cat-file --batch`."""
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        raw = self._git("cat-file", "--batch", data="".join(f"{b}\n" for b in wanted).encode())
        out: dict[str, bytes] = {}
        at = 0
        for blob in wanted:
            end = raw.index(b"\n", at)
            size = int(raw[at:end].split(b" ")[2])
            out[blob] = raw[end + 1 : end + 1 + size]
            at = end + 2 + size
        return out

    def patch(self, old: str, new: str, paths: Sequence[str], prefix: str) -> str:
        """A unified diff of `paths` from tree `old` to tree `new`."""
        if not paths or old == new:
            return ""
        raw = self._git(
            "diff-tree", "-p", "--no-renames", "--binary", "--no-color",
            f"--src-prefix=a/{prefix}", f"--dst-prefix=b/{prefix}",
            old, new, "--", *paths,
        )  # fmt: skip
        return raw.decode(errors="replace")


def _argv(*args: str) -> list[str]:
    flags = [item for key, value in _CONFIG.items() for item in ("-c", f"{key}={value}")]
    return ["git", *flags, *args]


def _beyond_link(root: Path, path: str) -> bool:
    """Is a folder on the way from `root` to `path` a symbolic link?"""
    folder = root
    for part in Path(path).parts[:-1]:
        folder = folder / part
        if folder.is_symlink():
            return True
    return False


def _literal(path: str) -> str:
    """`path` as a gitignore pattern that matches only itself."""
    escaped = "".join("\\" + c if c in "\\*?[]!# " else c for c in path)
    return escaped.replace("\n", "?")


def _entry(mode: str, blob: str) -> Entry | None:
    return None if mode == "000000" else Entry(mode, blob)


def _split(raw: bytes) -> list[str]:
    return [os.fsdecode(item) for item in raw.split(b"\0") if item]


def _join(paths: Sequence[str]) -> bytes:
    return b"".join(os.fsencode(path) + b"\0" for path in paths)
