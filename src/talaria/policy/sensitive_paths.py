"""Which file writes need a human's yes, whichever tool makes them.

The file tools (through `talaria.tools.write_boundary`) and the command analysis
(redirections, `tee`, `cp` ...) both ask this module, so a write to ~/.bashrc needs the same
yes whether the model used `write_file` or `echo ... >> ~/.bashrc`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

SHELL_STARTUP_FILES = frozenset(
    {
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".bash_aliases",
        ".zshrc",
        ".zshenv",
        ".zprofile",
        ".zlogin",
        ".zlogout",
        ".kshrc",
        ".mkshrc",
        ".cshrc",
        ".tcshrc",
        ".login",
        ".logout",
        ".config/fish/config.fish",
    }
)
"""Relative to the user's home: code in these runs in every new shell."""

SYSTEM_DIRS = (
    "/usr",
    "/bin",
    "/sbin",
    "/boot",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/sys",
    "/proc",
    "/root",
)
"""Writes below these change the machine, not a project (/etc has its own pattern). /opt, /srv
and /var are left out on purpose: projects and containers live there."""

_BLOCK_DEVICE = re.compile(
    r"/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d|rdisk\d|md\d|dm-\d"
    r"|mapper/|loop\d|sr\d|fd\d|disk/|block/|nbd\d|zd\d|bcache\d|ubi)"
)
_HARMLESS_DEVICES = re.compile(
    r"/dev/(null|zero|full|stdout|stderr|stdin|tty|random|urandom"
    r"|fd/\d+|pts/\d+|ptmx|shm(/.*)?|mqueue(/.*)?)$"
)


def is_block_device(path: str) -> bool:
    """True for paths naming a disk or partition: writing there destroys a file system."""
    return _BLOCK_DEVICE.match(path) is not None


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _forms(path: Path) -> list[str]:
    """The path as written and with symlinks resolved: a link must not hide its target."""
    absolute = os.path.normpath(os.path.abspath(os.path.expanduser(path)))
    return list(dict.fromkeys([absolute, os.path.realpath(absolute)]))


def classify_write(path: Path) -> tuple[str, str] | None:
    """(reason, pattern) when writing `path` needs approval, else None.

    The user's home is read from $HOME at call time so tests and sandboxes can move it.
    """
    home = os.path.normpath(os.path.expanduser("~"))
    for form in _forms(path):
        if form.startswith("/dev/") and not _HARMLESS_DEVICES.match(form):
            return (f"writes to the device {form}", "write to /dev")
        if _under(form, "/etc"):
            return (f"writes to system configuration {form}", "write to /etc")
        if _under(form, home):
            relative = os.path.relpath(form, home)
            if relative in SHELL_STARTUP_FILES:
                return (f"changes the shell startup file {form}", "write to shell startup file")
            if _under(relative, ".ssh"):
                return (f"changes SSH keys or configuration in {form}", "write to ~/.ssh")
        elif any(_under(form, root) for root in SYSTEM_DIRS):
            return (f"writes to the system directory containing {form}", "write to system dir")
    return None


def talaria_settings(path: Path, home: Path | None) -> tuple[str, str] | None:
    """(reason, pattern) when `path` is the talaria home's config.yaml or .env, whose
    settings and secrets the agent must not rewrite on its own."""
    if home is None:
        return None
    guarded = {
        os.path.join(form, name) for form in _forms(home) for name in ("config.yaml", ".env")
    }
    for form in _forms(path):
        if form in guarded:
            return (
                f"changes talaria's own settings or secrets ({form})",
                "write to talaria config",
            )
    return None


def resolve_path(raw: str, cwd: Path) -> Path:
    """`raw` made absolute against `cwd`, with ~ expanded and .. folded (symlinks kept).

    The file tools and the approval policy both read a path argument this way, so the file
    the policy judges is the file the tool opens."""
    path = Path(os.path.expanduser(raw))
    return Path(os.path.normpath(path if path.is_absolute() else cwd / path))
