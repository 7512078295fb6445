"""What the command sandbox costs: `true` run N times through the terminal tool's runner,
unconfined and under each sandbox mode. Usage: python bench/sandbox_overhead.py [--runs N]"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from talaria.tools.builtin.terminal import run_command
from talaria.tools.sandbox import SandboxPolicy, confine


def measure(prefix: list[str], cwd: str, runs: int) -> float:
    """Median milliseconds for one `true` command."""
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        run_command("true", cwd, 30.0, threading.Event(), prefix)
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as cwd:
        print(f"unconfined        {measure([], cwd, runs):6.1f} ms")
        for mode in ("read-only", "workspace-write"):
            policy = SandboxPolicy.resolve(Path(cwd), mode=mode, home=Path(cwd) / ".talaria")
            prefix = confine(policy, Path(cwd))
            label = mode if prefix else f"{mode} (no sandbox here)"
            print(f"{label:<17} {measure(prefix, cwd, runs):6.1f} ms")


if __name__ == "__main__":
    main()
