"""`talaria usage` and `/usage`: reports from the usage records real turns leave in the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import scripted_agent
from talaria.cli.main import main
from talaria.store.base import UsageRecord
from talaria.store.sqlite import SQLiteSessionStore
from talaria.store.usage import local_day
from talaria.testing import Fail, ScriptedProvider, call, text

NOW = time.time()
YESTERDAY, LAST_MONTH = NOW - 86400, NOW - 30 * 86400


def usage(inp: int, out: int, read: int = 0, write: int = 0, reasoning: int = 0,
          cost: float | None = 0.0) -> dict[str, object]:  # fmt: skip
    return {"input_tokens": inp, "output_tokens": out, "cache_read_tokens": read,
            "cache_write_tokens": write, "reasoning_tokens": reasoning,
            "estimated_cost_usd": cost}  # fmt: skip


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A store with known calls: two models yesterday in a titled session, an unpriced local
    model a month ago in another."""
    clock = [YESTERDAY]
    with SQLiteSessionStore(tmp_path / "state.db", clock=lambda: clock[0]) as store:
        store.create_session("s1", title="fix the build")
        store.create_session("s2")
        store.record_usage("s1", [
            UsageRecord("s1", "gpt-4.1", "openai", 2, usage(1000, 200, read=3000, cost=0.05)),
            UsageRecord("s1", "claude-sonnet-4-5", "anthropic", 1,
                        usage(500, 100, write=500, reasoning=40, cost=0.02)),
        ])  # fmt: skip
        clock[0] = LAST_MONTH
        store.record_usage(
            "s2", [UsageRecord("s2", "local", "custom", 3, usage(100, 10, cost=None))]
        )
    return tmp_path


def report(capsys: pytest.CaptureFixture[str], home: Path, *options: str) -> list[list[str]]:
    assert main(["usage", "--home", str(home), *options]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    return [[cell for cell in line.split("  ") if cell.strip()] for line in lines]


def cells(row: list[str]) -> list[str]:
    return [cell.strip() for cell in row]


def test_by_model_sums_the_disjoint_buckets_and_keeps_unknown_prices_apart(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    header, *rows = report(capsys, home)
    assert cells(header) == ["MODEL", "CALLS", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE",
                             "REASONING", "TOTAL", "CACHED", "COST"]  # fmt: skip
    assert [cells(row) for row in rows] == [
        ["openai:gpt-4.1", "2", "1,000", "200", "3,000", "0", "0", "4,200", "75%", "$0.0500"],
        ["anthropic:claude-sonnet-4-5", "1", "500", "100", "0", "500", "40", "1,100", "0%",
         "$0.0200"],
        ["custom:local", "3", "100", "10", "0", "0", "0", "110", "0%", "unknown"],
        ["total", "6", "1,600", "310", "3,000", "500", "40", "5,410", "59%",
         "$0.0700 + unknown"],
    ]  # fmt: skip


def test_since_by_day_and_by_session(capsys: pytest.CaptureFixture[str], home: Path) -> None:
    _, *recent = report(capsys, home, "--since", "7d")
    assert [cells(row)[0] for row in recent] == [
        "openai:gpt-4.1",
        "anthropic:claude-sonnet-4-5",
        "total",
    ]
    assert cells(recent[-1])[-1] == "$0.0700"
    _, *days = report(capsys, home, "--by", "day")
    assert [cells(row)[:2] for row in days] == [
        [local_day(LAST_MONTH), "3"],
        [local_day(YESTERDAY), "3"],
        ["total", "6"],
    ]
    _, *sessions = report(capsys, home, "--by", "session", "--since", "all")
    assert [cells(row)[0] for row in sessions] == ["s2", "s1 (fix the build)", "total"]


def test_json_report_has_the_same_numbers(capsys: pytest.CaptureFixture[str], home: Path) -> None:
    assert main(["usage", "--home", str(home), "--json", "--by", "session"]) == 0
    data = json.loads(capsys.readouterr().out)
    s1 = next(row for row in data["rows"] if row["key"] == "s1")
    assert s1["cost_usd"] == pytest.approx(0.07)
    assert s1["cache_hit_ratio"] == pytest.approx(3000 / 5000)
    s2 = next(row for row in data["rows"] if row["key"] == "s2")
    assert s2["cost_usd"] is None and s2["unpriced_calls"] == 3
    assert data["total"]["total_tokens"] == 5410


def test_a_bad_since_is_one_clear_error(capsys: pytest.CaptureFixture[str], home: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["usage", "--home", str(home), "--since", "last tuesday"])
    assert exit_info.value.code == 2
    assert "expected a span like 7d" in capsys.readouterr().err


def test_real_turns_with_a_fallback_are_recorded_by_model(tmp_path: Path) -> None:
    priced = {"input_tokens": 10_000, "output_tokens": 1_000}
    with ScriptedProvider(model="gpt-4o-mini") as primary, ScriptedProvider() as backup:
        primary.add(call("add", {"a": 1, "b": 2}, usage=priced), Fail(500), Fail(500), Fail(500))
        backup.add(text("3", usage={"input_tokens": 7, "output_tokens": 3}))
        primary.add(text("again", usage=priced))
        fallback = {"model": "backup-model", "base_url": backup.openai_base_url, "api_key": "k"}
        config = {"retry.base_delay": 0.01, "retry.max_delay": 0.05}
        with scripted_agent(primary, tmp_path, model="gpt-4o-mini", config=config,
                            fallback_providers=[fallback]) as agent:  # fmt: skip
            agent.chat("add")
            agent.chat("again")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "talaria.cli.main", "usage", "--home", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {row.split()[0]: row.split() for row in done.stdout.splitlines()[1:]}
    assert rows["custom:gpt-4o-mini"][1:3] == ["2", "20,000"]
    assert rows["custom:gpt-4o-mini"][-1] == "$0.0042"
    assert rows["custom:backup-model"][1:4] == ["1", "7", "3"]
    assert rows["custom:backup-model"][-1] == "unknown"
    assert " ".join(rows["total"][-3:]) == "$0.0042 + unknown"


def test_no_records_yet(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["usage", "--home", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "no usage recorded"
