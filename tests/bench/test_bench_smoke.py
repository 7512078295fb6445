"""The benches must keep running as talaria changes: run their talaria side with tiny sizes.

No timing is asserted (the machine's load decides those); what is asserted is that each bench
drives talaria to the planned outcome and reports it, and degrades to a readable reason when
the reference implementation is not installed.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(autouse=True)
def bench_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Make bench/ importable and send results to a temporary directory."""
    monkeypatch.syspath_prepend(str(BENCH_DIR))
    common = importlib.import_module("common")
    monkeypatch.setattr(common, "RESULTS_DIR", tmp_path / "results")


def bench(name: str) -> ModuleType:
    return importlib.import_module(name)


def results(tmp_path: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((tmp_path / "results" / f"{name}.json").read_text())
    return data


@pytest.mark.parametrize(
    "name",
    [
        "common",
        "serve",
        "driver_kit",
        "hermes_driver",
        "talaria_driver",
        "pydantic_ai_driver",
        "agents_sdk_driver",
        "loop_overhead",
        "first_request",
        "sessions",
        "import_construct",
        "parallel_tools",
        "persistence",
        "session_search",
        "telemetry_overhead",
        "run_all",
        "transport",
        "idle_agents",
        "checkpoints",
        "tasks",
        "gateway",
    ],
)
def test_every_bench_module_imports_without_side_effects(name: str) -> None:
    before = Path.cwd()
    module = bench(name)
    assert module.__doc__
    assert Path.cwd() == before


def test_scripted_plan_follows_the_turn_and_honours_a_step_limit() -> None:
    serve = bench("serve")
    plan = [[["noop", {"n": 0}]], [["noop", {"n": 1}]]]
    first = serve.step_for(plan, {"messages": [{"role": "user", "content": "go"}]})
    assert [c.arguments for c in first.tool_calls] == [{"n": 0}]
    later = {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": []},
            {"role": "tool", "content": "ok"},
            {"role": "assistant", "content": None, "tool_calls": []},
            {"role": "tool", "content": "ok"},
        ]
    }
    assert serve.step_for(plan, later).text == "done"
    cut = serve.step_for(plan, {"messages": [{"role": "user", "content": "steps=1"}]})
    assert cut.text == "done" and not cut.tool_calls


def test_the_echo_plan_answers_each_turn_with_its_message() -> None:
    serve = bench("serve")
    said = {"messages": [{"role": "user", "content": "[alice]\nr3 m1"}]}
    assert serve.echo(said).text == "echo: r3 m1"


def test_tables_show_how_many_times_cheaper_talaria_is() -> None:
    common = bench("common")
    table = common.format_table(
        "t",
        [
            common.Row("step", 0.002, 0.1, 0.001),
            common.Row("cold", 0.5, "unavailable", None, "s"),
        ],
    )
    assert "50.0x" in table
    assert "2 ms" in table and "100 ms" in table
    assert "unavailable" in table and "0.5 s" in table


def test_loop_bench_runs_talaria_through_every_planned_step(tmp_path: Path) -> None:
    rows = bench("loop_overhead").run(lengths=(4, 6), reps=1, peers=False)
    assert [row.reference for row in rows] == ["skipped"] * len(rows)
    assert all(set(row.peers.values()) == {"skipped"} for row in rows)
    assert all(isinstance(row.talaria, float) for row in rows)
    assert isinstance(rows[0].floor, float)
    saved = results(tmp_path, "loop_overhead")
    turns = saved["notes"]["talaria turns"]
    for steps in (6, 4, 2):
        assert any(t.startswith(f"steps={steps} ") and f"api_calls={steps}" in t for t in turns)
    assert saved["notes"]["requests the provider served"] >= 2 * (6 + 4 + 2 + 2)


def test_sessions_bench_runs_every_session_to_the_planned_end(tmp_path: Path) -> None:
    rows = bench("sessions").run(counts=(3,), peers=False, latency=0.0, sequential=1)
    figures = {row.metric.removeprefix("N=3: "): row.talaria for row in rows}
    assert figures["failures"] == 0
    assert figures["threads (peak)"] >= 1
    assert figures["wall time"] > 0 and figures["CPU per step"] > 0
    assert figures["memory per idle agent"] is not None
    assert rows[0].reference == "skipped"
    # warm-up + 1 sequential + 3 at once, 6 model calls each
    assert results(tmp_path, "sessions")["notes"]["requests the provider served"] >= 5 * 6


def test_a_session_that_fails_or_stops_early_counts_as_a_failure() -> None:
    kit = bench("driver_kit")
    figures = kit.session_figures(
        [6, "RuntimeError: boom", 5, 6], 4, 6, {"cpu_s": 1.2, "rss_before": 0, "rss_after": 4000}
    )
    assert figures["failures"] == 2
    assert figures["model_calls"] == 12
    assert figures["failure_examples"] == ["RuntimeError: boom", "5"]
    assert figures["cpu_per_step"] == pytest.approx(1.2 / 24)
    assert figures["idle_bytes_per_agent"] == 1000


def test_first_request_bench_times_the_library_and_the_cli(tmp_path: Path) -> None:
    rows = bench("first_request").run(reps=1, peers=False, variants=("http", "https + config"))
    sides = ["library"] * 3 + ["`chat -q`"] * 3
    assert [row.metric.split(": ")[0] for row in rows[:6]] == sides
    assert [row.metric.split(": ")[1] for row in rows[6:]] == sides
    assert all(row.metric.startswith("https + config: ") for row in rows[6:])
    for row in rows:
        assert isinstance(row.talaria, float) and row.talaria > 0
        assert row.reference == "skipped"
    first, exit_ = rows[0], rows[1]
    assert isinstance(first.floor, float) and isinstance(exit_.floor, float)
    assert first.talaria < exit_.talaria  # the request went out before the answer came back
    assert rows[3].peers == {"pydantic-ai": "no CLI", "Agents SDK": "no CLI"}
    assert isinstance(rows[3].floor, float)  # the CLI's pass has its own floor runs


def test_targets_say_pass_or_fail_from_the_figures() -> None:
    run_all, common = bench("run_all"), bench("common")
    row = common.Row
    start = [
        row("library: process start to first request", 0.25, unit="s"),
        row("`chat -q`: process start to first request", 0.5, unit="s"),
        row("http + config: library: process start to first request", 0.3, floor=0.3, unit="s"),
        row("http + config: `chat -q`: process start to first request", 0.3, floor=0.3, unit="s"),
        row("https + config: library: process start to first request", 0.3, floor=0.2, unit="s"),
        row("https + config: `chat -q`: process start to first request", 0.2, floor=0.2, unit="s"),
    ]
    loop = [
        row("marginal wall time per step, steps 3-40", 0.003, floor=0.0015),
        row("steps 41-150 against steps 3-40", 1.1, floor=1.0, unit="x"),
    ]
    many = [
        row("N=1,000: CPU per step", 0.004),
        row("N=1,000: threads (peak)", 12, unit="count"),
        row("N=1,000: CPU per step, one session at a time", 0.003),
        row("N=1,000: memory per idle agent", 250e3, unit="bytes"),
        row("N=1,000: failures", 0, unit="count"),
    ]
    store = [row("a", 0.001), row("b", 0.0012)]
    search = [row("search", 0.01)]
    verdicts = {
        name: check()[0]
        for name, check in run_all.targets(start, loop, many, 1000, store, search).items()
    }
    failing = {
        "`talaria chat -q`: process start to first request <= 0.3 s",
        "per step <= 1.5x the raw-httpx floor (40 steps)",
        "1,000 sessions: at most 200 KB per idle agent",
        "library, https + config: first request <= 1.2x the floor",
    }
    assert {name for name, met in verdicts.items() if met is False} == failing
    assert all(met is True for name, met in verdicts.items() if name not in failing)
    assert len(verdicts) == 14


def test_transport_bench_runs_every_client_through_the_loop(tmp_path: Path) -> None:
    rows = bench("transport").run(steps=3, reps=1)
    clients = ["raw asyncio (floor)", "httpx 0.28", "httpx2", "talaria transport"]
    names = [row.metric for row in rows]
    assert names == [f"{c}, per step" for c in clients] + [f"{c}, CPU per step" for c in clients]
    assert all(isinstance(row.talaria, float) and row.talaria > 0 for row in rows)
    assert results(tmp_path, "transport")["rows"][3]["metric"] == names[3]


def test_a_turn_that_stops_early_is_refused_not_reported() -> None:
    common = bench("common")
    with pytest.raises(RuntimeError, match="planned for 40 model calls made 5"):
        common.check_turns("talaria", [{"steps": None, "api_calls": 5, "final": "gave up"}], 40)


def test_parallel_bench_runs_the_three_tools_in_one_step(tmp_path: Path) -> None:
    parallel = bench("parallel_tools")
    rows = parallel.run(reps=1, reference=False)
    assert isinstance(rows[0].talaria, float)
    assert results(tmp_path, "parallel_tools")["notes"]["tools per step"] == 3


def test_persistence_bench_reports_each_size_and_why_the_reference_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    common = bench("common")
    monkeypatch.setattr(common, "VENVS_DIR", tmp_path / "no-venvs")
    rows = bench("persistence").run(appends=3, sizes=(10, 30), reference=True)
    assert [row.metric for row in rows] == [
        "append 1 message to a session of 10",
        "append 1 message to a session of 30",
    ]
    assert all(row.reference == "unavailable" for row in rows)
    assert "setup_peers.sh hermes" in results(tmp_path, "persistence")["notes"]["reference"]


def test_session_search_bench_finds_what_a_bare_fts_index_finds(tmp_path: Path) -> None:
    rows = bench("session_search").run(sessions=5, per_session=20, queries=6, reference=False)
    assert len(rows) == 4
    notes = results(tmp_path, "session_search")["notes"]
    assert notes["messages"] == 100
    assert notes["talaria"]["queries_with_hits"] >= notes["floor"]["queries_with_hits"] > 0


def test_search_corpus_is_the_same_for_every_backend() -> None:
    common = bench("common")
    first = list(common.search_corpus(2, 3))
    assert first == list(common.search_corpus(2, 3))
    assert [m["role"] for m in first[0]] == ["user", "assistant", "user"]
    assert len(first[0][0]["content"].split()) == 30


def test_telemetry_bench_runs_its_three_variants(tmp_path: Path) -> None:
    """In its own process: the bench installs global OpenTelemetry providers."""
    import os
    import subprocess
    import sys

    script = (
        "import sys, common, telemetry_overhead as bench\n"
        f"common.RESULTS_DIR = __import__('pathlib').Path({str(tmp_path / 'results')!r})\n"
        "bench.run(steps=3, reps=1)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BENCH_DIR), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    rows = results(tmp_path, "telemetry_overhead")["rows"]
    variants = {row["metric"].split(":")[0] for row in rows[:-1]}
    assert variants == {
        "telemetry off (default)",
        "telemetry on (OTel SDK, batch export)",
        "budgets on (cost and tokens)",
    }
    assert len(rows) == 2 * 3 + 1  # CPU and wall per variant, then the import
    assert all(isinstance(row["talaria"], float) for row in rows)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_idle_agents_bench_reports_the_cost_of_an_idle_agent(mode: str) -> None:
    figures = bench("idle_agents").run(agents=4, steps=2, mode=mode)
    assert figures["agents"] == 4 and figures["homes"] == "shared"
    # the running loop, and the shared one of sync callers once an earlier test used it
    assert figures["event_loops_alive"] <= 2, "no event loop per agent"
    assert figures["threads_idle"] < 4 + 20, "no thread per agent"
    assert isinstance(figures["rss_per_idle_agent_kb"], float)


def test_checkpoints_bench_snapshots_and_rewinds_the_changed_files() -> None:
    figures = bench("checkpoints").measure(files=300, changed=5, runs=2)
    assert set(figures) == {
        "first snapshot", "turn snapshot", "turn snapshot cpu", "unchanged step",
        "unchanged step cpu", "rewind",
    }  # fmt: skip


def test_tasks_bench_checks_each_outcome_itself(tmp_path: Path) -> None:
    """The coding-task bench's talaria side against scripted models: a task done is counted
    done by its own check, a task claimed but not done is a failure saying what is missing."""
    from talaria.testing import ScriptedProvider, call, text

    tasks = bench("tasks")
    hello = next(task for task in tasks.TASKS if task.name == "hello")
    done = [
        call("write_file", {"path": "hello.py", "content": "print('Hello, world!')\n"}),
        call("terminal", {"command": "python hello.py"}),
        text("It prints Hello, world!"),
    ]
    with ScriptedProvider(done) as server:
        outcome = tasks.run_task(tasks.TALARIA, hello, server.openai_base_url, "scripted-model")
    assert (outcome["ok"], outcome["steps"]) == (True, 3), outcome
    with ScriptedProvider([text("Done: hello.py prints Hello, world!")]) as server:
        outcome = tasks.run_task(tasks.TALARIA, hello, server.openai_base_url, "scripted-model")
        assert tasks.server_window(server.openai_base_url) == "unknown (no /props)"
        tasks.wait_idle(server.openai_base_url)  # no /slots: returns at once
    assert (outcome["ok"], outcome["why"]) == (False, "no hello.py")
    table = tasks.rows([hello], {"talaria": [outcome], "hermes-agent 0.19": "not installed"})
    assert [row.metric for row in table][:2] == ["hello", "tasks solved"]
    assert table[0].talaria.startswith("FAIL (no hello.py), 1 steps")
    assert table[1].talaria == "0 of 1" and table[1].reference == "not installed"
    loaded = {"talaria": [{**outcome, "load": 4.5}, {"load": 2.0}], "pydantic-ai": "not installed"}
    assert tasks.loads(loaded) == "talaria 2.0-4.5"
