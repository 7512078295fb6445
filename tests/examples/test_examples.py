"""Every program in examples/ runs as a user runs it (`python examples/<name>.py`, a process of
its own) against the scripted provider, which `TALARIA_EXAMPLE_BASE_URL` points it at; what it
prints is what its docstring promises, and every request it made was one a real provider
accepts."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from talaria.testing import ScriptedProvider, calls, text
from talaria.testing.script import Step

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@dataclass
class Example:
    script: list[Step]
    prints: list[str]
    env: dict[str, str] = field(default_factory=dict)


CASES = {
    "tool": Example(
        [calls(("add", {"a": 2, "b": 40})), text("2 + 40 = 42")],
        ["2 + 40 = 42"],
    ),
    "structured_results": Example(
        [calls(("forecast", {"city": "Paris"})), text("Yes: sunny, 21 C.")],
        [
            "answer: Yes: sunny, 21 C.",
            "ended because: text_response",
            'the model read: {"city":"Paris","sky":"sunny","celsius":21}',
        ],
    ),
    "events": Example(
        [calls(("word_count", {"text": "the quick brown fox"})), text("Four words.")],
        ["-> word_count({'text': 'the quick brown fox'})", "<- word_count: 4", "Four words."],
    ),
    "approvals": Example(
        [calls(("terminal", {"command": "rm -rf build"})), text("Removed the build folder.")],
        [
            "approve `rm -rf build`? (deletes files recursively) -> once",
            "answer: Removed the build folder.",
            "build folder still there: False",
        ],
    ),
    "custom_store": Example(
        [text("Hello there, friend.")],
        ["Hello there, friend.", '"seq": 0, "role": "user"}', '"seq": 1, "role": "assistant"}'],
    ),
    "mcp_tools": Example(
        [calls(("mcp__clock__today", {})), text("Today is 2026-12-02.")],
        ["Today is 2026-12-02."],
    ),
    "serve_behind_your_app": Example([text("Hello, app!")], ["agent: Hello, app!"]),
}


def run_example(name: str, server: ScriptedProvider, home: Path, **env: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        env={
            **os.environ,
            "TALARIA_EXAMPLE_BASE_URL": server.openai_base_url,
            "TALARIA_HOME": str(home),
            **env,
        },
        cwd=home,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_example_prints_what_it_promises(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    with ScriptedProvider(case.script) as server:
        printed = run_example(name, server, tmp_path)
    for line in case.prints:
        assert line in printed, printed
    assert server.invalid_requests == []
    assert len(server.requests) == len(case.script)


def test_the_postgres_example_resumes_a_session_from_another_agent(
    tmp_path: Path, pg_url: str
) -> None:
    with ScriptedProvider([text("Remembered."), text("pelican")]) as server:
        printed = run_example("postgres", server, tmp_path, TALARIA_EXAMPLE_PG_URL=pg_url)
    assert "second agent: pelican" in printed
    assert "4 messages in PostgreSQL" in printed
    assert "Remember the word 'pelican'." in str(server.requests[-1].body["messages"])


def test_the_durable_example_runs_a_turn_on_temporal(tmp_path: Path, temporal_target: str) -> None:
    with ScriptedProvider([text("Hello from a worker.")]) as server:
        printed = run_example(
            "durable_turn", server, tmp_path, TALARIA_EXAMPLE_TEMPORAL=temporal_target
        )
    assert "answer: Hello from a worker." in printed


def test_the_testing_example_passes_under_pytest(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(EXAMPLES / "test_with_scripted_provider.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_every_example_is_run_here() -> None:
    programs = {path.stem for path in EXAMPLES.glob("*.py")} - {"endpoint", "mcp_clock_server"}
    covered = {*CASES, "postgres", "durable_turn", "test_with_scripted_provider"}
    assert programs == covered
    assert len(programs) >= 10
