"""Can this machine sandbox commands? Asked once per process, because the answer cannot change
while it runs and every command would otherwise pay for a second bubblewrap start.

The probe starts bubblewrap with the same namespaces and the same capability drop a real
command gets, so "available" means "a command will really run confined", not "a binary named
bwrap exists".
"""

from __future__ import annotations

import functools
import subprocess
import sys

from talaria.values import frozen

PROBE_TIMEOUT = 10.0


@frozen(slots=True)
class SandboxSupport:
    """Whether confined commands can run here, and why not."""

    available: bool
    bwrap: str | None
    detail: str
    """What was found, or why the sandbox cannot be used here (shown by `talaria doctor`)."""


@functools.cache
def sandbox_support() -> SandboxSupport:
    """Whether bubblewrap can start a confined command here (cached for the process)."""
    if not sys.platform.startswith("linux"):
        return SandboxSupport(False, None, f"no sandbox on {sys.platform} (Linux bubblewrap only)")
    import shutil  # with its archive modules, 7 ms at start-up

    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return SandboxSupport(False, None, "bubblewrap (bwrap) is not installed")
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
        why = reason[-1] if reason else f"exit code {done.returncode}"
        return SandboxSupport(False, bwrap, f"bubblewrap cannot create namespaces here: {why}")
    return SandboxSupport(True, bwrap, f"bubblewrap at {bwrap} with user namespaces")
