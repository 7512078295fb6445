"""The command sandbox: every terminal command and background process runs under bubblewrap.

A pattern policy cannot contain code the agent writes and then runs; a sandbox can. Modes:

- ``workspace-write`` (default): the whole file system read-only, except the working
  directory, the configured ``sandbox.writable_roots`` and a private /tmp; inside those,
  the protected set (`talaria.tools.protected_paths`: every ``.git``, the talaria home, files
  that run code later) stays read-only; no network unless ``sandbox.network: true``.
- ``read-only``: nothing writable but a private /tmp.
- ``full-access``: no sandbox.

Every capability is dropped and a user namespace is used even when talaria runs as root:
without that a root process inside bubblewrap could simply remount / read-write. Where
bubblewrap or user namespaces are missing, one notice says so and commands run with the
approval policy alone, or are refused when ``sandbox.required: true``.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from talaria.config_schema import default_for
from talaria.events import Notice
from talaria.tools.base import ToolError

if TYPE_CHECKING:
    from talaria.config import Config
    from talaria.tools.sandbox_probe import SandboxSupport

log = logging.getLogger("talaria.tools")

SANDBOX_MODES = ("read-only", "workspace-write", "full-access")

_WRITE_DENIED = re.compile(r"Read-only file system|Permission denied|Operation not permitted")
_NETWORK_DOWN = re.compile(
    r"Network is unreachable|Could not resolve host|Temporary failure in name resolution"
    r"|Name or service not known|Connection refused|No route to host|ENETUNREACH|ECONNREFUSED"
    r"|Address family not supported",
    re.I,
)
_TMP_PATH = re.compile(r"(?<![\w./-])/tmp/[^\s'\":,;)]+")
_notice_lock = threading.Lock()
_notices_given: set[str] = set()


@dataclass(frozen=True, slots=True)
class Root:
    """A writable root as resolved at session start: a real directory, and which one."""

    path: Path
    device: int
    inode: int


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """What a sandboxed command (and a file tool, unasked) may touch; built once per session
    from the `sandbox.*` settings, with the writable roots resolved to real directories then
    (a keyword left out is the schema's default)."""

    mode: str = default_for("sandbox.mode")
    network: bool = default_for("sandbox.network")
    writable_roots: tuple[str, ...] = ()
    """As configured (relative to the working directory, ~ allowed)."""
    required: bool = default_for("sandbox.required")
    home: Path | None = None
    """The talaria home, kept read-only inside the sandbox."""
    bwrap_path: str = default_for("sandbox.bwrap_path") or ""
    """The bubblewrap to use (`sandbox.bwrap_path`); empty: the system's (`sandbox_probe`)."""
    hidden_paths: tuple[str, ...] = ()
    """More secrets to hide from commands (`sandbox.hidden_paths`; see `hidden_paths`)."""
    roots: tuple[Root, ...] = ()
    """Where writes may go: resolved once, never again per command (see `resolve`)."""
    found: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The protected paths inside the roots, looked for once when the first command runs."""

    @classmethod
    def from_config(cls, config: Config, cwd: Path) -> SandboxPolicy:
        sandbox = config.sandbox
        return cls.resolve(
            cwd,
            mode=sandbox.mode,
            network=sandbox.network,
            writable_roots=tuple(sandbox.writable_roots),
            required=sandbox.required,
            home=Path(config.home),
            bwrap_path=sandbox.bwrap_path or "",
            hidden_paths=tuple(sandbox.hidden_paths),
        )

    @classmethod
    def resolve(
        cls,
        cwd: Path,
        *,
        mode: str = default_for("sandbox.mode"),
        network: bool = default_for("sandbox.network"),
        writable_roots: tuple[str, ...] = (),
        required: bool = default_for("sandbox.required"),
        home: Path | None = None,
        bwrap_path: str = default_for("sandbox.bwrap_path") or "",
        hidden_paths: tuple[str, ...] = (),
    ) -> SandboxPolicy:
        """A policy whose roots are `cwd` and `writable_roots` as real directories now: a
        relative root that a command later replaces with a link (to ~, say) widens nothing."""
        roots: list[Root] = []
        if mode == "workspace-write":
            for raw in (cwd, *(cwd / os.path.expanduser(root) for root in writable_roots)):
                real = Path(os.path.realpath(raw))
                try:
                    info = real.stat()
                except OSError:
                    continue
                if real.is_dir() and all(root.path != real for root in roots):
                    roots.append(Root(real, info.st_dev, info.st_ino))
        return cls(
            mode, network, writable_roots, required, home, bwrap_path, hidden_paths, tuple(roots)
        )

    @property
    def confines(self) -> bool:
        return self.mode != "full-access"

    @property
    def root_paths(self) -> list[Path]:
        """The directories a command may write (besides its private /tmp)."""
        return [root.path for root in self.roots]

    def inside(self, real: Path) -> bool:
        """Is the real path `real` inside a writable root?"""
        return any(real == root.path or root.path in real.parents for root in self.roots)

    def support(self) -> SandboxSupport:
        """Whether this machine can confine commands with the bubblewrap this policy names
        (asked once per process), and not with one a command could have replaced."""
        from talaria.tools.sandbox_probe import SandboxSupport, sandbox_support

        support = sandbox_support(self.bwrap_path or None)
        if support.bwrap is not None and self.inside(Path(os.path.realpath(support.bwrap))):
            why = f"bubblewrap at {support.bwrap} lies inside a writable root"
            return SandboxSupport(False, None, why)
        return support

    def protected(self) -> list[Path]:
        """The protected paths inside the roots (`protected_paths`), found on first use."""
        if "mounts" not in self.found:
            from talaria.tools.git_watch import GitWatch
            from talaria.tools.protected_paths import protected_mounts

            watch = GitWatch(self.root_paths)
            self.found["git"] = watch
            self.found["mounts"] = protected_mounts(self.root_paths, self.home, watch.known)
        return self.found["mounts"]

    def after_command(self, escalated: bool) -> list[Path]:
        """Look for git metadata a command just created in the roots: an escalated (approved)
        command's is kept and protected from now on; a sandboxed one's is renamed aside (the
        new names are returned). Nothing before the session's first sandboxed command."""
        watch = self.found.get("git")
        if watch is None:
            return []
        if escalated:
            self.found["mounts"] = [*self.found["mounts"], *watch.accept_new()]
            return []
        return watch.block_new()

    def hidden(self) -> list[Path]:
        """The secrets commands must not read (`hidden_paths`), found on first use; those in
        the real /tmp are left out (the sandbox's /tmp is private, so they are not there)."""
        if "hidden" not in self.found:
            from talaria.tools.hidden_paths import hidden_mounts

            found = hidden_mounts(self.home, self.hidden_paths)
            seen = [p for p in found if not _under(p, Path("/tmp")) or self.inside(p)]
            self.found["hidden"] = [
                path
                for path in seen
                if not any(_under(path, other) for other in seen if other != path)
            ]
        return self.found["hidden"]


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def check_roots(policy: SandboxPolicy) -> None:
    """Fail closed when a root is no longer the directory resolved at session start (it was
    moved and replaced, perhaps by a link): binding it now could make anything writable."""
    for root in policy.roots:
        try:
            info = os.stat(root.path)
        except OSError:
            info = None
        same = info is not None and (info.st_dev, info.st_ino) == (root.device, root.inode)
        if not same or os.path.realpath(root.path) != str(root.path):
            raise ToolError(
                f"the command was not run: the writable root {root.path} is no longer the "
                "directory it was when the session started (moved, or replaced by a link); "
                "start a new session to use it"
            )


def bwrap_argv(bwrap: str, policy: SandboxPolicy, cwd: Path, seccomp: bool = False) -> list[str]:
    """The bubblewrap command line that confines one command to `policy`; with `seccomp`, the
    network-off socket filter is read from descriptor 3 (`talaria.tools.sandbox_seccomp`)."""
    argv = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not policy.network:
        argv.append("--unshare-net")
    if seccomp:
        argv += ["--seccomp", "3"]
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    if policy.mode == "read-only":
        argv += ["--ro-bind", str(cwd), str(cwd)]  # visible even below the private /tmp
    for root in policy.root_paths:
        argv += ["--bind", str(root), str(root)]
    for path in policy.protected():
        argv += ["--ro-bind", str(path), str(path)]
    for path in policy.hidden():
        if path.is_dir():
            argv += ["--tmpfs", str(path), "--remount-ro", str(path)]
        else:
            argv += ["--ro-bind", "/dev/null", str(path)]
    return [*argv, "--chdir", str(cwd), "--"]


def confine(
    policy: SandboxPolicy | None, cwd: Path, emit: Callable[[Any], None] | None = None
) -> list[str]:
    """The argv prefix that runs a command inside the sandbox; [] when it runs unconfined
    (full-access, or no sandbox on this machine after one notice). Raises `ToolError` when
    the sandbox is required but unavailable."""
    if policy is None or not policy.confines:
        return []
    support = policy.support()
    if not support.available or support.bwrap is None:
        return _unconfined(policy, support.detail, emit)
    check_roots(policy)
    if not policy.network:
        from talaria.tools.sandbox_seccomp import filter_path, with_filter

        path = filter_path()
        if path is None:
            _unfiltered(policy, emit)
        else:
            return with_filter(bwrap_argv(support.bwrap, policy, cwd, seccomp=True), path)
    return bwrap_argv(support.bwrap, policy, cwd)


def _unconfined(
    policy: SandboxPolicy, detail: str, emit: Callable[[Any], None] | None
) -> list[str]:
    if policy.required:
        raise ToolError(
            f"the command was not run: sandbox.required is true but {detail}. "
            "Install bubblewrap, or set sandbox.required: false to run with the approval "
            "policy alone."
        )
    _notice_once(
        f"commands are NOT sandboxed: {detail}; only the approval policy guards them "
        "(set sandbox.required: true to refuse instead)",
        emit,
    )
    return []


def _unfiltered(policy: SandboxPolicy, emit: Callable[[Any], None] | None) -> None:
    detail = f"there is no socket filter for {os.uname().machine}"
    if policy.required:
        raise ToolError(
            f"the command was not run: sandbox.required is true but {detail}, so Unix "
            "sockets outside the sandbox would stay reachable with sandbox.network: false"
        )
    _notice_once(
        f"{detail}: with network off, Unix sockets outside the sandbox stay reachable", emit
    )


def _notice_once(message: str, emit: Callable[[Any], None] | None) -> None:
    with _notice_lock:
        if message in _notices_given:
            return
        _notices_given.add(message)
    log.warning(message)
    if emit is not None:
        emit(Notice("warning", message))


def failure_hint(policy: SandboxPolicy, cwd: Path, output: str, exit_code: int | None) -> str:
    """A note for the model when a confined command seems to have failed because of the
    sandbox, saying how to ask for it to run outside; "" otherwise."""
    if exit_code == 0:
        return ""
    if _WRITE_DENIED.search(output):
        roots = ", ".join(str(root) for root in policy.root_paths) or "nothing"
        what = f"writes only to {roots} and a private /tmp"
        if policy.mode == "workspace-write":
            what += " (every .git, the talaria home and files that run code later stay read-only)"
    elif not policy.network and _NETWORK_DOWN.search(output):
        what = "has no network access (sandbox.network is false)"
    elif "No such process" in output:
        what = (
            "runs each command in its own process namespace, so it sees and signals only its "
            "own processes (stop background processes with the process tool)"
        )
    elif "No such file or directory" in output and _hidden_tmp_path(policy, cwd, output):
        what = "has a private /tmp: files in the real /tmp are not visible there"
    else:
        return ""
    return (
        f"[sandbox: this command ran in the {policy.mode} sandbox, which {what}. If it must "
        "do this, call terminal again with the same command, escalate=true and a "
        "justification: the user will be asked to let it run outside the sandbox.]"
    )


def _hidden_tmp_path(policy: SandboxPolicy, cwd: Path, output: str) -> bool:
    """Does the output name a path in /tmp that the private /tmp hides? The working directory
    and the writable roots are bound into the sandbox even below /tmp (`bwrap_argv`), so a
    file missing there is simply missing: saying the sandbox hides it sent a small model off
    to escalate, or to give up, instead of writing the file first (bench/tasks.py)."""
    shown = [Path(os.path.realpath(cwd)), *policy.root_paths]
    return any(
        not any(path == root or root in path.parents for root in shown)
        for path in (Path(match.group()) for match in _TMP_PATH.finditer(output))
    )


def describe(policy: SandboxPolicy, cwd: Path) -> tuple[bool, str]:
    """(confined, what is in force) for `talaria doctor`."""
    if not policy.confines:
        return False, "full-access: commands run without a sandbox"
    support = policy.support()
    if not support.available:
        fallback = "commands are refused" if policy.required else "approval policy alone"
        return False, f"{policy.mode} requested, but {support.detail}: {fallback}"
    roots = ", ".join(str(root) for root in policy.root_paths)
    writable = f"writable: {roots}, private /tmp" if roots else "writable: private /tmp only"
    network = "network on" if policy.network else "network off (Unix sockets too: seccomp)"
    return True, f"{policy.mode} ({support.detail}) · {writable} · {network}"
