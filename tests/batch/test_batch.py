"""`talaria batch` run as a user runs it: a real subprocess against the scripted provider, the
results file on disk, a kill -9 halfway and a restart that runs only the rest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from batch_tasks import kill_9_halfway, write_tasks
from helpers import asked_prompts, per_task_script
from talaria.testing import Fail, ScriptedProvider, text


def batch_command(server: ScriptedProvider, home: Path, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "talaria.cli.main", "batch", *args,
        "--model", "scripted-model", "--base-url", server.openai_base_url, "--api-key", "test",
        "--toolsets", "todo", "--home", str(home),
    ]  # fmt: skip


def read_results(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_batch(command: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TALARIA_HOME": ""}
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


def test_every_task_gets_its_own_session_and_a_full_trajectory(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", 6)
    with ScriptedProvider(script=per_task_script()) as server:
        done = run_batch(batch_command(server, tmp_path / "home", str(tasks), "-n", "3"))
        assert server.invalid_requests == []
    assert done.returncode == 0, done.stderr
    lines = read_results(tmp_path / "tasks.results.jsonl")
    assert sorted(line["id"] for line in lines) == [f"t{n:03d}" for n in range(6)]
    assert len({line["session_id"] for line in lines}) == 6
    first = next(line for line in lines if line["id"] == "t000")
    assert first["final_response"] == "done: task 000"
    assert first["turn_exit_reason"] == "text_response" and first["completed"]
    assert [m["role"] for m in first["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert first["usage"]["total_tokens"] > 0 and "cost" in first
    assert "6 tasks: 6 completed" in done.stderr


def test_bad_lines_are_reported_together_and_nothing_runs(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        '{"id": "a", "prompt": "fine"}\n'
        "not json\n"
        '{"id": "b"}\n'
        '{"id": "a", "prompt": "again"}\n'
        '{"id": "c", "prompt": "x", "temperature": 2}\n'
        '{"id": "d", "prompt": "x", "max_turns": 0}\n'
    )
    with ScriptedProvider(script=per_task_script()) as server:
        done = run_batch(batch_command(server, tmp_path / "home", str(tasks)))
        assert server.requests == []
    assert done.returncode == 2
    for expected in (
        "tasks.jsonl:2: not valid JSON",
        "tasks.jsonl:3: 'prompt' must be a non-empty string",
        "tasks.jsonl:4: id 'a' repeats line 1",
        "tasks.jsonl:5: unknown key(s) temperature",
        "tasks.jsonl:6: 'max_turns' must be a positive integer",
    ):
        assert expected in done.stderr
    assert not (tmp_path / "tasks.results.jsonl").exists()


def test_a_failing_task_is_recorded_and_the_others_finish(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "only", "prompt": "hello", "system": "Answer tersely."}\n')
    out = tmp_path / "out" / "results.jsonl"
    with ScriptedProvider([Fail(400, "bad request: nope")]) as server:
        failed = run_batch(batch_command(server, tmp_path / "home", str(tasks), "-o", str(out)))
    assert failed.returncode == 2
    (line,) = read_results(out)
    assert line["turn_exit_reason"].startswith("failed") and "nope" in line["error"]
    with ScriptedProvider([text("hi")]) as server:  # a failed id is finished: not run again
        again = run_batch(batch_command(server, tmp_path / "home", str(tasks), "-o", str(out)))
        assert server.requests == []
    assert again.returncode == 0 and "1 already done" in again.stderr


def test_a_batch_killed_halfway_runs_only_the_rest_when_restarted(tmp_path: Path) -> None:
    count, concurrency = 100, 20  # bench/batch.py runs 200
    tasks = write_tasks(tmp_path / "tasks.jsonl", count)
    out = tmp_path / "results.jsonl"
    with ScriptedProvider(script=per_task_script(delay=0.05)) as server:
        command = batch_command(server, tmp_path / "home", str(tasks), "-n", str(concurrency))
        command += ["-o", str(out)]
        kill_9_halfway(command, out, count)
        finished_first = {line["id"] for line in _complete_lines(out)}
        assert count // 2 <= len(finished_first) < count
        asked_before = len(server.requests)

        second = run_batch(command)
        assert second.returncode == 0, second.stderr
        rerun = {p.split()[1] for p in asked_prompts(server)[asked_before:]}
        assert server.invalid_requests == []

    lines = read_results(out)
    assert sorted(line["id"] for line in lines) == [f"t{n:03d}" for n in range(count)]
    assert not rerun & {task_id[1:] for task_id in finished_first}
    assert f"{len(finished_first)} already done" in second.stderr


def _complete_lines(path: Path) -> list[dict[str, Any]]:
    raw = path.read_text()
    return [json.loads(line) for line in raw[: raw.rfind("\n") + 1].splitlines()]


@pytest.mark.parametrize("bad", ["0", "-3"])
def test_concurrency_must_be_positive(tmp_path: Path, bad: str) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", 1)
    with ScriptedProvider(script=per_task_script()) as server:
        done = run_batch(batch_command(server, tmp_path / "home", str(tasks), "-n", bad))
    assert done.returncode == 2
    assert f"--concurrency/-n: expected a whole number from 1 to 10000, got '{bad}'" in done.stderr
