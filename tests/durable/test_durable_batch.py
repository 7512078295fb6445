"""`talaria batch --temporal`: 60 tasks, 20 at a time, on real workers (bench/batch.py runs
200); the batch process is killed halfway and restarted, and no task runs twice (in-flight
turns are re-attached)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from batch_tasks import kill_9_halfway, line_count, write_tasks
from helpers import asked_prompts, per_task_script
from talaria.testing import ScriptedProvider
from temporal_cluster import WorkerProcess, new_queue, worker_home

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(300)]


def test_a_batch_on_temporal_killed_halfway_finishes_without_running_a_task_twice(
    temporal_target: str, tmp_path: Path
) -> None:
    count, concurrency = 60, 20
    tasks = write_tasks(tmp_path / "tasks.jsonl", count)
    out = tmp_path / "results.jsonl"
    queue = new_queue()
    home = worker_home(tmp_path / "home", heartbeat=30)  # no worker dies here
    command = [
        sys.executable, "-m", "talaria.cli.main", "batch", str(tasks), "-n", str(concurrency),
        "-o", str(out), "--temporal", temporal_target, "--task-queue", queue,
    ]  # fmt: skip
    env = {**os.environ, "TALARIA_HOME": str(tmp_path / "client-home")}
    with ScriptedProvider(script=per_task_script(delay=0.02)) as server:
        workers = [WorkerProcess(temporal_target, queue, server, home, "todo") for _ in range(2)]
        try:
            kill_9_halfway(command, out, count, env=env)
            done_first = line_count(out)

            second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
            assert second.returncode == 0, second.stderr
        finally:
            for worker in workers:
                worker.stop()
        asked = Counter(asked_prompts(server))
        assert server.invalid_requests == []

    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["id"] for line in lines) == [f"t{n:03d}" for n in range(count)]
    assert all(line["completed"] for line in lines)
    answers = {line["final_response"] for line in lines}
    assert answers == {f"done: task {n:03d}" for n in range(count)}
    assert set(asked.values()) == {2}, "a task ran twice"  # two model calls per task, once
    assert f"{done_first} already done" in second.stderr
