"""Task files for `talaria batch`, and killing a batch halfway through them."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any


def write_tasks(path: Path, count: int, **extra: Any) -> Path:
    with path.open("w") as handle:
        for n in range(count):
            handle.write(json.dumps({"id": f"t{n:03d}", "prompt": f"task {n:03d}", **extra}) + "\n")
    return path


def kill_9_halfway(command: list[str], out: Path, count: int, **popen: Any) -> None:
    """Run the batch command and kill -9 it once half the tasks are in the results file."""
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **popen)
    deadline = time.monotonic() + 180
    while line_count(out) < count // 2:
        assert first.poll() is None, first.stderr.read() if first.stderr else ""
        assert time.monotonic() < deadline, "the batch made no progress"
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)


def line_count(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0
