"""Server load: N concurrent runs on one `talaria serve` process, each one agent turn of two
model calls (a read_file call, then the answer) against a scripted provider that waits 200 ms
before every answer. Every run must complete.

Prints, per run, the added latency (wall time from POST /v1/runs to its run.completed event,
minus the 2 x 200 ms the model itself takes) at p50 and p95, and the server process's CPU
time and memory. Two rounds: first turns on N new sessions, then a second turn on each.
The clients run in this process, on the same cores as the server.

Run: python bench/server_load.py [--runs 200] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from common import ProviderProcess, Row, report

MODEL_CALLS = 2
PLAN = [[("read_file", {"path": "notes.txt"})]]
TICKS = os.sysconf("SC_CLK_TCK")
SERVER_KEY = "bench-server-key-0123456789"


def start_server(provider_url: str, home: Path) -> tuple[subprocess.Popen[bytes], str]:
    home.mkdir(parents=True, exist_ok=True)
    (home / "notes.txt").write_text("a note for the agent to read\n")
    (home / "config.yaml").write_text(
        "context:\n  engine: none\nmemory:\n  enabled: false\nserver:\n  max_live_sessions: 512\n"
    )
    log = home / "serve.log"
    command = [
        sys.executable, "-m", "talaria.cli.main", "serve", "--port", "0", "--home", str(home),
        "--base-url", provider_url, "--model", "scripted-model", "--api-key", "bench",
        "--api-mode", "chat_completions", "--toolsets", "file",
    ]  # fmt: skip
    env = {**os.environ, "TALARIA_SERVER_KEY": SERVER_KEY}
    with open(log, "wb") as sink:
        proc = subprocess.Popen(command, stderr=sink, cwd=home, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"listening on (\S+)", log.read_text(errors="replace"))
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"talaria serve did not start: {log.read_text(errors='replace')}")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def memory_mb(pid: int) -> dict[str, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    values = {k: int(v) / 1024 for k, v in re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, re.M)}
    return {"rss_mb": values.get("VmRSS", 0.0), "peak_rss_mb": values.get("VmHWM", 0.0)}


async def one_run(http: httpx.AsyncClient, session_id: str | None) -> tuple[float, str, str]:
    """(seconds from POST to the terminal event, that event's name, the session id)."""
    start = time.perf_counter()
    body: dict[str, Any] = {"input": "read the notes"}
    if session_id:
        body["session_id"] = session_id
    created = await http.post("/v1/runs", json=body)
    created.raise_for_status()
    run = created.json()
    last = ""
    async with http.stream("GET", run["events_url"]) as stream:
        async for line in stream.aiter_lines():
            if line.startswith("event: run."):
                last = line.removeprefix("event: ")
    return time.perf_counter() - start, last, run["session_id"]


async def round_of(url: str, sessions: list[str | None]) -> list[tuple[float, str, str]]:
    limits = httpx.Limits(max_connections=len(sessions) * 2, max_keepalive_connections=0)
    auth = {"Authorization": f"Bearer {SERVER_KEY}"}
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits, headers=auth) as http:
        return await asyncio.gather(*(one_run(http, s) for s in sessions))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(pid: int, url: str, sessions: list[str | None], floor: float) -> dict[str, Any]:
    cpu_before = cpu_seconds(pid)
    wall_start = time.perf_counter()
    results = asyncio.run(round_of(url, sessions))
    wall = time.perf_counter() - wall_start
    failed = [name for _, name, _ in results if name != "run.completed"]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(results)} runs did not complete: {failed[:5]}")
    added = [seconds - floor for seconds, _, _ in results]
    return {
        "runs": len(results),
        "added_p50_s": statistics.median(added),
        "added_p95_s": percentile(added, 0.95),
        "wall_s": wall,
        "server_cpu_s": cpu_seconds(pid) - cpu_before,
        **memory_mb(pid),
        "sessions": [session for _, _, session in results],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()
    floor = MODEL_CALLS * args.latency
    provider_process = ProviderProcess(PLAN, delay=args.latency)
    with provider_process as provider, tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(provider.url, Path(tmp) / "home")
        try:
            httpx.get(url + "/health", timeout=60).raise_for_status()
            idle = memory_mb(proc.pid)["rss_mb"]
            first = measure(proc.pid, url, [None] * args.runs, floor)
            second = measure(proc.pid, url, list(first.pop("sessions")), floor)
            second.pop("sessions")
        finally:
            proc.terminate()
            proc.wait(30)
    rows = []
    for label, result in (("new sessions", first), ("second turn", second)):
        rows += [
            Row(f"{label}: added latency per run, p50", result["added_p50_s"]),
            Row(f"{label}: added latency per run, p95", result["added_p95_s"]),
            Row(f"{label}: wall time for all {result['runs']} runs", result["wall_s"], unit="s"),
            Row(f"{label}: server CPU for all runs", result["server_cpu_s"], unit="s"),
            Row(f"{label}: server CPU per run", result["server_cpu_s"] / result["runs"]),
        ]
    notes = {
        "runs": f"{args.runs} concurrent, {MODEL_CALLS} model calls each, "
        f"{args.latency * 1000:.0f} ms provider latency per call (floor {floor:.1f} s per run)",
        "server memory": f"{idle:.0f} MB idle, {second['rss_mb']:.0f} MB after, "
        f"peak {second['peak_rss_mb']:.0f} MB",
        "all runs completed": True,
    }
    report("server_load", "talaria serve: concurrent runs on one process", rows, notes)
    print(json.dumps({"first": first, "second": second}, indent=1))


if __name__ == "__main__":
    main()
