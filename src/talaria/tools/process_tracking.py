"""Every process a command starts, found again however it detached, so it ends with the command.

A process group alone is not enough: `setsid`, `nohup ... &` with redirected output, or a
double fork leave the group (and the pipe) behind. Each command therefore gets a tag, and its
processes are found by every means that survives detaching:

* a cgroup of its own (cgroup v2, where this process may create one): nothing escapes it;
* the tag in the environment (``TALARIA_PROCESS_TAG``), which every descendant inherits;
* its process group and session id;
* this process is made a child subreaper (Linux), so orphaned descendants are re-parented
  to talaria instead of init, and are reaped here after they are killed.

Only processes started with ``env -i`` *and* ``setsid`` outside a cgroup can escape.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

TAG_VARIABLE = "TALARIA_PROCESS_TAG"
KILL_GRACE = 2.0
PR_SET_CHILD_SUBREAPER = 36


@dataclass
class Tracked:
    """One command's processes: its tag, its leader and (when available) its cgroup."""

    tag: str
    owner: str
    background: bool
    leader: int = 0
    started: int = 0
    """The leader's start time (clock ticks since boot)."""
    cgroup: Path | None = None
    adopted: set[int] = field(default_factory=set)
    """Orphans re-parented to this process (the subreaper): reaped here once killed."""

    def members(self) -> list[int]:
        """Live (non-zombie) processes of the command, the leader included. Only processes
        started after the leader can be its descendants: the others' environments are not
        read (that keeps a scan cheap)."""
        found = set(_cgroup_pids(self.cgroup))
        for pid, stat in _processes():
            state, ppid, pgid, sid, started = stat
            if state == "Z" or started < self.started:
                continue
            ours = bool(self.leader) and self.leader in (pgid, sid)
            if ours or pid in found or _tagged(pid, self.tag):
                found.add(pid)
                if ppid == os.getpid() and pid != self.leader:
                    self.adopted.add(pid)
        found.discard(os.getpid())
        return sorted(found)

    def kill(self, grace: float = KILL_GRACE) -> int:
        """SIGTERM every member, SIGKILL what is left after `grace`; how many there were."""
        victims = self.members()
        _signal_all(victims, signal.SIGTERM)
        deadline = time.monotonic() + grace
        left = victims
        while left and time.monotonic() < deadline:
            time.sleep(0.02)
            self._reap()
            left = self.members()
        if left:
            _cgroup_kill(self.cgroup)
            _signal_all(left, signal.SIGKILL)
            time.sleep(0.02)
        self._reap()
        return len(victims)

    def _reap(self) -> None:
        for pid in list(self.adopted):
            with contextlib.suppress(ChildProcessError, OSError):
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    self.adopted.discard(pid)

    def release(self) -> None:
        """Forget the command (its processes are gone): remove its cgroup."""
        REGISTRY.forget(self.tag)
        if self.cgroup is not None:
            for _ in range(25):
                try:
                    self.cgroup.rmdir()
                    return
                except FileNotFoundError:
                    return
                except OSError:
                    time.sleep(0.02)


class TrackingRegistry:
    """The commands of this interpreter that may still have processes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tracked: dict[str, Tracked] = {}
        self._ids = itertools.count(1)
        self._subreaper = False

    def new(self, owner: str, *, background: bool = False) -> Tracked:
        """A fresh tag; put it in the command's environment before starting it."""
        with self._lock:
            if not self._subreaper:
                self._subreaper = _become_subreaper()
            tracked = Tracked(f"{os.getpid()}.{next(self._ids)}", owner, background)
            self._tracked[tracked.tag] = tracked
        return tracked

    def forget(self, tag: str) -> None:
        with self._lock:
            self._tracked.pop(tag, None)

    def of(self, owner: str | None) -> list[Tracked]:
        with self._lock:
            return [t for t in self._tracked.values() if owner is None or t.owner == owner]


REGISTRY = TrackingRegistry()


def start_tracking(tracked: Tracked, leader: int) -> None:
    """Note the started leader and move it into a cgroup of its own when one can be made."""
    tracked.leader = leader
    stat = _stat(leader)
    tracked.started = stat[4] if stat is not None else 0
    tracked.cgroup = _new_cgroup(tracked.tag)
    if tracked.cgroup is not None:
        try:
            (tracked.cgroup / "cgroup.procs").write_text(str(leader))
        except OSError:
            with contextlib.suppress(OSError):
                tracked.cgroup.rmdir()
            tracked.cgroup = None


def kill_owned(owner: str, *, background: bool = True) -> None:
    """End every process the commands of `owner` (a session) left, background ones included
    unless `background` is False."""
    for tracked in REGISTRY.of(owner):
        if background or not tracked.background:
            tracked.kill()
            tracked.release()


def kill_everything() -> None:
    """End every process any command of this interpreter started (at exit, on a signal)."""
    for tracked in REGISTRY.of(None):
        tracked.kill(grace=0.5)
        tracked.release()


atexit.register(kill_everything)


# ---- /proc, cgroups and prctl ---------------------------------------------------------


Stat = tuple[str, int, int, int, int]
"""(state, ppid, pgid, sid, start time in clock ticks since boot) from /proc/<pid>/stat."""


def _stat(pid: int | str) -> Stat | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])


def _processes() -> list[tuple[int, Stat]]:
    """(pid, stat) for every process visible in /proc."""
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit() and (stat := _stat(entry)) is not None:
            found.append((int(entry), stat))
    return found


def _tagged(pid: int, tag: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return False
    return f"{TAG_VARIABLE}={tag}".encode() in environ.split(b"\0")


def _signal_all(pids: list[int], number: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, number)


def _become_subreaper() -> bool:
    import ctypes  # only the first background process needs it

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _cgroup_root() -> Path | None:
    """This process's own cgroup v2 directory, if it can hold sub-groups we create."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    own = next((line[3:] for line in lines if line.startswith("0::")), None)
    mount = next((m.split()[4] for m in mounts if " - cgroup2 " in m), None)
    if own is None or mount is None:
        return None
    root = Path(mount) / own.lstrip("/")
    return root if os.access(root, os.W_OK) else None


_CGROUP_ROOT: list[Path | None] = []


def _new_cgroup(tag: str) -> Path | None:
    if not _CGROUP_ROOT:
        _CGROUP_ROOT.append(_cgroup_root())
    root = _CGROUP_ROOT[0]
    if root is None:
        return None
    path = root / f"talaria-{tag}"
    try:
        path.mkdir()
    except OSError:
        return None
    return path


def _cgroup_pids(cgroup: Path | None) -> list[int]:
    if cgroup is None:
        return []
    try:
        return [int(pid) for pid in (cgroup / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _cgroup_kill(cgroup: Path | None) -> None:
    if cgroup is not None:
        with contextlib.suppress(OSError):
            (cgroup / "cgroup.kill").write_text("1")
