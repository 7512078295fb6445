"""Batch throughput: N tasks (one tool call, then an answer) with a scripted model of fixed
latency, run locally (`talaria batch`) and on a Temporal dev server with real workers.

Prints tasks per second for both, beside the ideal: with `concurrency` tasks in flight and two
model calls per task, `concurrency / (2 * latency)` tasks per second if nothing else cost time.

    python bench/batch.py                      # 200 tasks, 20 at a time, 200 ms per reply
    python bench/batch.py --tasks 50 --no-temporal
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import MODEL, ProviderProcess, write_results

PLAN: Any = [[("todo", {})]]


def tasks_of(count: int) -> list[Any]:
    from talaria.batch.tasks import BatchTask

    return [BatchTask(f"t{n:04d}", f"task {n}") for n in range(count)]


def agent_options(url: str, home: Path) -> dict[str, Any]:
    return {
        "model": MODEL,
        "base_url": url,
        "api_key": "bench",
        "toolsets": ["todo"],
        "home": str(home),
        "config": {"model.context_length": 128000, "memory.enabled": False},
    }


def run_local(url: str, workdir: Path, count: int, concurrency: int) -> float:
    from talaria.batch.local import run_local as run
    from talaria.batch.tasks import ResultsFile

    with ResultsFile(workdir / "local.jsonl") as results:
        started = time.perf_counter()
        summary = asyncio.run(
            run(tasks_of(count), results, concurrency=concurrency,
                agent_options=agent_options(url, workdir / "home-local"))
        )  # fmt: skip
        elapsed = time.perf_counter() - started
    assert summary.completed == count, summary
    return elapsed


def run_temporal(url: str, workdir: Path, count: int, concurrency: int, workers: int) -> float:
    binary = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    port = _free_port()
    server = subprocess.Popen(
        [binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
         "--db-filename", str(workdir / "temporal.db"), "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    target = f"127.0.0.1:{port}"
    procs: list[subprocess.Popen[str]] = []
    try:
        client = _connect(target)
        home = workdir / "home-temporal"
        home.mkdir()
        for _ in range(workers):
            procs.append(_worker(target, url, home))
        return asyncio.run(_temporal_batch(client, target, workdir, count, concurrency))
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
        server.terminate()
        server.wait(timeout=30)


async def _temporal_batch(
    client: Any, target: str, workdir: Path, count: int, concurrency: int
) -> float:
    from talaria.batch.tasks import ResultsFile
    from talaria.durable.batch import run_on_temporal
    from talaria.durable.client import connect

    connected = await connect(target)
    with ResultsFile(workdir / "temporal.jsonl") as results:
        started = time.perf_counter()
        summary = await run_on_temporal(
            connected, "bench", tasks_of(count), results, concurrency=concurrency, agent_options={}
        )
        elapsed = time.perf_counter() - started
    assert summary.completed == count, summary
    return elapsed


def _worker(target: str, url: str, home: Path) -> subprocess.Popen[str]:
    settings = "model:\n  context_length: 128000\nmemory:\n  enabled: false\n"
    (home / "config.yaml").write_text(settings)
    log = home / f"worker-{time.monotonic_ns()}.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "talaria.cli.main", "worker", "--temporal", target,
             "--task-queue", "bench", "--model", MODEL, "--base-url", url, "--api-key", "bench",
             "--toolsets", "todo", "--home", str(home)],
            stderr=sink, stdout=subprocess.DEVNULL, text=True,
            env={**os.environ, "TALARIA_HOME": str(home)},
        )  # fmt: skip
    deadline = time.monotonic() + 120
    while "serving" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the worker did not start: {log.read_text()}")
        time.sleep(0.1)
    return proc


def _connect(target: str) -> Any:
    from temporalio.client import Client

    deadline = time.monotonic() + 60
    while True:
        try:
            return asyncio.run(Client.connect(target))
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model reply")
    parser.add_argument("--workers", type=int, default=2, help="Temporal worker processes")
    parser.add_argument("--no-temporal", action="store_true")
    args = parser.parse_args()
    ideal = args.concurrency / (2 * args.latency)
    rows: dict[str, float] = {}
    with ProviderProcess(PLAN, delay=args.latency) as provider:
        workdir = Path(tempfile.mkdtemp(prefix="talaria-bench-batch-"))
        try:
            rows["local"] = run_local(provider.url, workdir, args.tasks, args.concurrency)
            if not args.no_temporal:
                rows["temporal"] = run_temporal(
                    provider.url, workdir, args.tasks, args.concurrency, args.workers
                )
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"{args.tasks} tasks, {args.concurrency} at a time, {args.latency * 1000:.0f} ms per "
          f"model reply, 2 replies per task; ideal {ideal:.1f} tasks/s")  # fmt: skip
    print("| runner | wall s | tasks/s | of ideal |")
    print("|---|---|---|---|")
    figures = {}
    for name, seconds in rows.items():
        rate = args.tasks / seconds
        figures[name] = {"seconds": seconds, "tasks_per_s": rate}
        print(f"| {name} | {seconds:.1f} | {rate:.1f} | {rate / ideal:.0%} |")
    write_results("batch", [], {"settings": vars(args), "ideal_tasks_per_s": ideal, **figures})


if __name__ == "__main__":
    main()
