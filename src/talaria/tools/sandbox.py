"""The command sandbox: every terminal command and background process runs under bubblewrap.

A pattern policy cannot contain code the agent writes and then runs; a sandbox can. Modes:

- ``workspace-write`` (default): the whole file system read-only, except the working
  directory, the configured ``sandbox.writable_roots`` and a private /tmp; inside those,
  ``.git/hooks``, ``.git/config`` and the talaria home stay read-only; no network unless
  ``sandbox.network: true``.
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
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from talaria.events import Notice
from talaria.tools.base import ToolError
from talaria.values import frozen

log = logging.getLogger("talaria.tools")

SANDBOX_MODES = ("read-only", "workspace-write", "full-access")
HOME_GUARDED = ("config.yaml", ".env", "SOUL.md", "plugins", "skills", "memories", "state.db")
"""What stays read-only in a talaria home that lies inside a writable root (else the whole
home is bound read-only)."""
_GIT_GUARDED = (".git/hooks", ".git/config")
"""Code git runs on its own, and the file that can point it at more such code."""

_WRITE_DENIED = re.compile(r"Read-only file system|Permission denied|Operation not permitted")
_NETWORK_DOWN = re.compile(
    r"Network is unreachable|Could not resolve host|Temporary failure in name resolution"
    r"|Name or service not known|Connection refused|No route to host|ENETUNREACH|ECONNREFUSED",
    re.I,
)
_notice_lock = threading.Lock()
_notice_given = False


@frozen(slots=True)
class SandboxPolicy:
    """What a sandboxed command may touch; built from the `sandbox.*` settings."""

    mode: str = "workspace-write"
    network: bool = False
    writable_roots: tuple[str, ...] = ()
    required: bool = False
    home: Path | None = None
    """The talaria home, kept read-only inside the sandbox."""

    @classmethod
    def from_config(cls, config: Any) -> SandboxPolicy:
        roots = config.get("sandbox.writable_roots", []) or []
        return cls(
            mode=str(config.get("sandbox.mode", "workspace-write")),
            network=bool(config.get("sandbox.network", False)),
            writable_roots=tuple(str(root) for root in roots),
            required=bool(config.get("sandbox.required", False)),
            home=Path(config.home),
        )

    @property
    def confines(self) -> bool:
        return self.mode != "full-access"

    def writable(self, cwd: Path) -> list[Path]:
        """The directories a command may write (besides its private /tmp)."""
        if self.mode != "workspace-write":
            return []
        roots = [cwd, *(cwd / os.path.expanduser(root) for root in self.writable_roots)]
        return list(dict.fromkeys(Path(os.path.realpath(root)) for root in roots))


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _guarded(policy: SandboxPolicy, writable: list[Path]) -> Iterable[Path]:
    """Paths inside the writable roots that must stay read-only."""
    for root in writable:
        yield from (root / name for name in _GIT_GUARDED)
    if policy.home is None:
        return
    home = Path(os.path.realpath(policy.home))
    if any(_under(root, home) for root in writable):
        yield from (home / name for name in HOME_GUARDED)
    else:
        yield home


def bwrap_argv(bwrap: str, policy: SandboxPolicy, cwd: Path) -> list[str]:
    """The bubblewrap command line that confines one command to `policy`."""
    argv = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not policy.network:
        argv.append("--unshare-net")
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    writable = [root for root in policy.writable(cwd) if root.is_dir()]
    if policy.mode == "read-only":
        argv += ["--ro-bind", str(cwd), str(cwd)]  # visible even below the private /tmp
    for root in writable:
        argv += ["--bind", str(root), str(root)]
    for path in _guarded(policy, writable):
        if path.exists():
            argv += ["--ro-bind", str(path), str(path)]
    return [*argv, "--chdir", str(cwd), "--"]


def confine(
    policy: SandboxPolicy | None, cwd: Path, emit: Callable[[Any], None] | None = None
) -> list[str]:
    """The argv prefix that runs a command inside the sandbox; [] when it runs unconfined
    (full-access, or no sandbox on this machine after one notice). Raises `ToolError` when
    the sandbox is required but unavailable."""
    if policy is None or not policy.confines:
        return []
    from talaria.tools.sandbox_probe import sandbox_support  # when the first command runs

    support = sandbox_support()
    if support.available and support.bwrap:
        return bwrap_argv(support.bwrap, policy, cwd)
    if policy.required:
        raise ToolError(
            f"the command was not run: sandbox.required is true but {support.detail}. "
            "Install bubblewrap, or set sandbox.required: false to run with the approval "
            "policy alone."
        )
    _notice_once(support.detail, emit)
    return []


def _notice_once(detail: str, emit: Callable[[Any], None] | None) -> None:
    global _notice_given
    with _notice_lock:
        if _notice_given:
            return
        _notice_given = True
    message = (
        f"commands are NOT sandboxed: {detail}; only the approval policy guards them "
        "(set sandbox.required: true to refuse instead)"
    )
    log.warning(message)
    if emit is not None:
        emit(Notice("warning", message))


def failure_hint(policy: SandboxPolicy, cwd: Path, output: str, exit_code: int | None) -> str:
    """A note for the model when a confined command seems to have failed because of the
    sandbox, saying how to ask for it to run outside; "" otherwise."""
    if exit_code == 0:
        return ""
    if _WRITE_DENIED.search(output):
        roots = ", ".join(str(root) for root in policy.writable(cwd)) or "nothing"
        what = f"writes only to {roots} and a private /tmp"
        if policy.mode == "workspace-write":
            what += " (.git/hooks, .git/config and the talaria home read-only)"
    elif not policy.network and _NETWORK_DOWN.search(output):
        what = "has no network access (sandbox.network is false)"
    elif "No such process" in output:
        what = (
            "runs each command in its own process namespace, so it sees and signals only its "
            "own processes (stop background processes with the process tool)"
        )
    elif "No such file or directory" in output and "/tmp/" in output:
        what = "has a private /tmp: files in the real /tmp are not visible there"
    else:
        return ""
    return (
        f"[sandbox: this command ran in the {policy.mode} sandbox, which {what}. If it must "
        "do this, call terminal again with the same command, escalate=true and a "
        "justification: the user will be asked to let it run outside the sandbox.]"
    )


def describe(policy: SandboxPolicy, cwd: Path) -> tuple[bool, str]:
    """(confined, what is in force) for `talaria doctor`."""
    if not policy.confines:
        return False, "full-access: commands run without a sandbox"
    from talaria.tools.sandbox_probe import sandbox_support

    support = sandbox_support()
    if not support.available:
        fallback = "commands are refused" if policy.required else "approval policy alone"
        return False, f"{policy.mode} requested, but {support.detail}: {fallback}"
    roots = ", ".join(str(root) for root in policy.writable(cwd))
    writable = f"writable: {roots}, private /tmp" if roots else "writable: private /tmp only"
    network = "network on" if policy.network else "network off"
    return True, f"{policy.mode} ({support.detail}) · {writable} · {network}"
