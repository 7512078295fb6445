"""What the faults of docs/faults.md cost a user, through the real `talaria -p`: seconds from a
SIGTERM during `sleep 300` to the exit (inside bubblewrap and with full-access), a run against
a database another process keeps locked (`store.lock_timeout`, default 10 s) beside a run
refused at once (its start-up), and a turn whose model streams forever (`model.total_timeout` 2 s,
two attempts).
Usage: python bench/faults.py [--runs N]"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from talaria.testing import Endless, ScriptedProvider, call, text

MODEL = ("--model", "scripted-model", "--api-key", "k", "--yolo", "--toolsets", "terminal")


def talaria(home: Path, server: ScriptedProvider, *argv: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "talaria.cli.main", "-p", "go", *MODEL, *argv]
    command += ["--base-url", server.openai_base_url]
    env = {**os.environ, "TALARIA_HOME": str(home)}
    return subprocess.Popen(command, env=env, cwd=home, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip


def sigterm_to_exit(sandbox: str) -> float:
    """Seconds from SIGTERM (sent once `sleep 300` runs) to talaria's exit."""
    with tempfile.TemporaryDirectory() as home, ScriptedProvider() as server:
        server.add(call("terminal", {"command": "sleep 300"}), text("after"))
        chat = talaria(Path(home), server, "--sandbox", sandbox)
        while not any(_is_sleep(pid) for pid in os.listdir("/proc") if pid.isdigit()):
            time.sleep(0.02)
        started = time.perf_counter()
        chat.send_signal(signal.SIGTERM)
        chat.wait(60)
        return time.perf_counter() - started


def _is_sleep(pid: str) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x00300\x00"
    except OSError:
        return False


def timed_run(home: Path, server: ScriptedProvider, *argv: str) -> float:
    started = time.perf_counter()
    talaria(home, server, *argv).wait(120)
    return time.perf_counter() - started


def locked_run() -> float:
    """Seconds of a run against a database held locked by another process (default limit)."""
    with tempfile.TemporaryDirectory() as home, ScriptedProvider([text("x")]) as server:
        conn = sqlite3.connect(Path(home) / "state.db", isolation_level=None)
        conn.execute("CREATE TABLE held (x)")
        conn.execute("BEGIN IMMEDIATE")
        try:
            return timed_run(Path(home), server)
        finally:
            conn.close()


def bad_config_run() -> float:
    """Seconds of a run refused at once (a bad config value): the start-up the others include."""
    with tempfile.TemporaryDirectory() as home, ScriptedProvider([text("x")]) as server:
        (Path(home) / "config.yaml").write_text("agent: {max_tool_workers: 0}\n")
        return timed_run(Path(home), server)


def endless_turn() -> float:
    """Seconds of a turn whose model streams forever (model.total_timeout 2 s, two attempts),
    in process after a first answer (the SDK import is not part of the deadline)."""
    from talaria import Agent

    config = {"model.total_timeout": 2, "retry.max_attempts": 2, "retry.base_delay": 0.1}
    steps = [text("warm"), Endless(), Endless()]
    with tempfile.TemporaryDirectory() as home, ScriptedProvider(steps) as server:
        agent = Agent(model="scripted-model", api_key="k", base_url=server.openai_base_url,
                      home=home, config=config, toolsets=[])  # fmt: skip
        with agent:
            agent.chat("warm up")
            started = time.perf_counter()
            agent.chat("talk")
            return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    rows = {
        "SIGTERM -> exit, workspace-write (bwrap)": lambda: sigterm_to_exit("workspace-write"),
        "SIGTERM -> exit, full-access": lambda: sigterm_to_exit("full-access"),
        "talaria -p refused by a bad config value": bad_config_run,
        "talaria -p on a locked state.db (10 s limit)": locked_run,
        "turn on an endless stream (2 s limit, 2 tries)": endless_turn,
    }
    for label, measure in rows.items():
        print(f"{label:<44} {statistics.median(measure() for _ in range(runs)):6.2f} s")


if __name__ == "__main__":
    main()
