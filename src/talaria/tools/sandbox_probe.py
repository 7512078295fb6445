"""Can this machine sandbox commands, and with which bubblewrap? Asked once per process (per
configured path), because the answer cannot change while it runs and every command would
otherwise pay for a second bubblewrap start.

The sandbox's own parts must be trusted: bubblewrap comes from a fixed system location
(`/usr/bin/bwrap`), or the absolute `sandbox.bwrap_path` the user configured, never from
PATH, where an activated project venv (which a command may write) comes first. The file and
every directory above it must belong to root and be writable by nobody else; that it lies
outside every writable root is checked per session (`talaria.tools.sandbox.confine`).

The probe starts bubblewrap with the same namespaces and the same capability drop a real
command gets, so "available" means "a command will really run confined", not "a binary named
bwrap exists".
"""

from __future__ import annotations

import functools
import os
import stat
import subprocess
import sys
from dataclasses import dataclass

PROBE_TIMEOUT = 10.0
SYSTEM_BWRAP = ("/usr/bin/bwrap", "/bin/bwrap")
"""Where a distribution installs bubblewrap; the first that exists is used."""


@dataclass(frozen=True, slots=True)
class SandboxSupport:
    """Whether confined commands can run here, and why not."""

    available: bool
    bwrap: str | None
    detail: str
    """What was found, or why the sandbox cannot be used here (shown by `talaria doctor`)."""


def untrusted(path: str) -> str | None:
    """Why the program at `path` cannot be trusted to build the sandbox (None: it can): it and
    every directory above it must be owned by root and not writable by group or others."""
    if not os.path.isabs(path):
        return f"{path} is not an absolute path"
    real = os.path.realpath(path)
    place = real
    while True:
        try:
            info = os.stat(place)
        except OSError as exc:
            return f"{place} cannot be checked: {exc.strerror}"
        if info.st_uid != 0:
            return f"{place} is owned by uid {info.st_uid}, not root"
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (
            place != real and info.st_mode & stat.S_ISVTX
        ):
            return f"{place} is writable by users other than root"
        if place == "/":
            return None
        place = os.path.dirname(place)


def choose_bwrap(configured: str | None) -> tuple[str | None, str]:
    """(the bubblewrap to use or None, why that one, or why none)."""
    if configured:
        if not os.path.exists(configured):
            return None, f"bubblewrap (bwrap) is not installed at {configured} (sandbox.bwrap_path)"
        return configured, "sandbox.bwrap_path"
    for candidate in SYSTEM_BWRAP:
        if os.path.exists(candidate):
            return candidate, "the system's; never looked up on PATH"
    where = " or ".join(SYSTEM_BWRAP)
    return None, f"bubblewrap (bwrap) is not installed at {where} (or set sandbox.bwrap_path)"


@functools.cache
def sandbox_support(configured: str | None = None) -> SandboxSupport:
    """Whether bubblewrap can start a confined command here (cached for the process)."""
    if not sys.platform.startswith("linux"):
        return SandboxSupport(False, None, f"no sandbox on {sys.platform} (Linux bubblewrap only)")
    bwrap, why = choose_bwrap(configured)
    if bwrap is None:
        return SandboxSupport(False, None, why)
    distrust = untrusted(bwrap)
    if distrust is not None:
        return SandboxSupport(False, None, f"bubblewrap at {bwrap} is not trusted: {distrust}")
    probe = [
        bwrap,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--",
        "true",
    ]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=PROBE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SandboxSupport(False, bwrap, f"bubblewrap could not start: {exc}")
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why_not = reason[-1] if reason else f"exit code {done.returncode}"
        return SandboxSupport(False, bwrap, f"bubblewrap cannot create namespaces here: {why_not}")
    return SandboxSupport(
        True, bwrap, f"bubblewrap at {bwrap} ({why}; root-owned) with user namespaces"
    )
