"""Running the real `talaria` CLI in a subprocess, and checking what it left behind."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from talaria.testing import ScriptedProvider
from talaria.tools.process_tracking import TAG_VARIABLE

MODEL_ARGS = ("--model", "scripted-model", "--api-key", "test-key")


def _sandbox_modes() -> list[Any]:
    """Commands run inside bubblewrap (workspace-write) and unconfined (full-access); the
    sandboxed case needs bwrap, which CI must have."""
    import pytest

    from talaria.tools.sandbox_probe import sandbox_support

    support = sandbox_support()
    if not support.available and os.environ.get("CI") == "true":
        raise RuntimeError(f"CI needs bubblewrap for the sandboxed cases: {support.detail}")
    confined = pytest.param(
        "workspace-write",
        marks=[pytest.mark.bwrap, pytest.mark.skipif(not support.available, reason=support.detail)],
    )
    return [confined, "full-access"]


SANDBOX_MODES = _sandbox_modes()
"""Parametrize a test over both: process tracking and signals must hold in each."""


def cli(
    home: Path,
    *argv: str,
    preexec: Callable[[], Any] | None = None,
    wrap: Sequence[str] = (),
    timeout: float = 30,
) -> subprocess.CompletedProcess[str]:
    """`talaria <argv>` with TALARIA_HOME=home (run through the `wrap` command, if any); its
    exit code, stdout and stderr."""
    env = {**os.environ, "TALARIA_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("TALARIA_DEBUG", None)
    return subprocess.run(
        [*wrap, sys.executable, "-m", "talaria.cli.main", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=preexec,
    )


def ask(
    home: Path, server: ScriptedProvider, question: str, *more: str, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """`talaria chat -q question` against the scripted provider."""
    return cli(
        home,
        "chat",
        "-q",
        question,
        *MODEL_ARGS,
        "--base-url",
        server.openai_base_url,
        *more,
        **kwargs,
    )


def one_line(stderr: str) -> str:
    """The single line a failure prints (the test fails when there are more, or none)."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{stderr}"
    assert "Traceback" not in stderr
    return lines[0]


def integrity(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def stored_contents(db: Path) -> list[str]:
    """The text of every stored message of every session, oldest session first."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT content FROM messages ORDER BY session_id, seq").fetchall()
    finally:
        conn.close()
    return [str(row[0]) for row in rows]


def tagged_processes() -> list[tuple[int, str]]:
    """(pid, command line) of every live process a talaria command of this test process
    started: tagged, and working in this process's temporary folder (a parallel worker's
    commands work in another)."""
    ours = os.environ["TALARIA_TEST_TMP"]
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        variables = environ.split(b"\0")
        tagged = any(v.startswith(TAG_VARIABLE.encode() + b"=") for v in variables)
        if tagged and state != b"Z" and _works_in(entry, ours):
            found.append((int(entry), cmdline))
    return found


def wait_for(condition, seconds: float = 30.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def _works_in(pid: str, folder: str) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/cwd").startswith(folder)
    except OSError:
        return False
