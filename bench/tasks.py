"""Ten small coding tasks on a real local model: talaria, the reference and pydantic-ai side by
side, with the success rate, the model calls (steps) and the time each took.

Every side runs every task in a fresh working directory holding the task's files, in its own
interpreter (`task` command of its driver), against the same llama.cpp server
(scripts/model_server.sh: Qwen2.5-Coder Instruct, temperature 0 and a fixed seed unless the
side sends its own). The bench checks the outcome itself, the same way for every side: the
file exists with the right content, the script prints what it should, the test passes, or the
answer names what was asked. talaria and the reference use their own built-in file and
terminal tools; pydantic-ai has none, so its driver gives it four (read_file, write_file,
terminal, search_files) written the plain way its docs show.

    python bench/tasks.py                   # starts the 1.5B model on a free port
    python bench/tasks.py --url http://127.0.0.1:8080/v1 --model qwen2.5-coder-1.5b-instruct
    python bench/tasks.py --only talaria --tasks hello fizzbuzz
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import HERMES, PYDANTIC_AI, TALARIA, Row, Side, report, unavailable

ROOT = Path(__file__).resolve().parent.parent
SIDES = (TALARIA, HERMES, PYDANTIC_AI)
MAX_STEPS = 12
"""Model calls each side may make per task."""
WINDOW = 32768
"""The server's context window: the model's trained window (the reference refuses less than
64K and is told the server's window is 64K, bench/hermes_driver.py)."""
TASK_SECONDS = 480
"""A task still running after this is a failure (a runaway generation, a loop)."""

Check = Callable[[Path, str], str | None]
"""The workspace and the final answer -> None when the task is done, else what is wrong."""


@dataclass(frozen=True)
class Task:
    name: str
    prompt: str
    check: Check
    files: dict[str, str] = field(default_factory=dict)


def _run(workspace: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], cwd=workspace, capture_output=True, text=True, timeout=30
    )


def _prints(script: str, expected: str) -> Check:
    def check(workspace: Path, answer: str) -> str | None:
        if not (workspace / script).exists():
            return f"no {script}"
        out = _run(workspace, script).stdout.strip()
        return None if out == expected else f"{script} printed {out[:60]!r}"

    return check


def _mentions(*words: str) -> Check:
    def check(workspace: Path, answer: str) -> str | None:
        missing = [word for word in words if word.lower() not in answer.lower()]
        return f"the answer does not say {', '.join(missing)}" if missing else None

    return check


def _fixed_test(workspace: Path, answer: str) -> str | None:
    if (workspace / "test_calc.py").read_text() != FIX_TEST["test_calc.py"]:
        return "the test was changed"
    ran = _run(workspace, "test_calc.py")
    return None if ran.returncode == 0 else "the test still fails"


def _timeout_is_60(workspace: Path, answer: str) -> str | None:
    out = _run(workspace, "-c", "import config; print(config.TIMEOUT, config.RETRIES, config.NAME)")
    shown = out.stdout.strip() or out.stderr.strip()[-80:]
    return None if shown == "60 3 service" else f"config.py now gives {shown!r}"


def _settings(workspace: Path, answer: str) -> str | None:
    path = workspace / "settings.json"
    if not path.exists():
        return "no settings.json"
    try:
        value = json.loads(path.read_text())
    except ValueError:
        return "settings.json is not JSON"
    return None if value == {"name": "demo", "debug": True} else f"settings.json is {value}"


def _square_added(workspace: Path, answer: str) -> str | None:
    probe = "from mathutils import double, square; print(square(7), double(4))"
    out = _run(workspace, "-c", probe)
    return None if out.stdout.strip() == "49 8" else f"square/double: {out.stderr[-80:].strip()}"


FIX_TEST = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": "from calc import add\n\nassert add(2, 3) == 5, add(2, 3)\nprint('ok')\n",
}

TASKS = (
    Task(
        "hello",
        "Create a Python script hello.py that prints Hello, world! and run it.",
        _prints("hello.py", "Hello, world!"),
    ),
    Task(
        "fizzbuzz",
        "Write fizzbuzz.py that prints the numbers 1 to 15, one per line, but Fizz for "
        "multiples of 3, Buzz for multiples of 5 and FizzBuzz for multiples of both. Run it.",
        _prints(
            "fizzbuzz.py",
            "\n".join(
                "FizzBuzz"
                if n % 15 == 0
                else "Fizz"
                if n % 3 == 0
                else "Buzz"
                if n % 5 == 0
                else str(n)
                for n in range(1, 16)
            ),
        ),
    ),
    Task(
        "fix-failing-test",
        "Running python test_calc.py fails. Fix the bug in calc.py (do not change the test), "
        "then run the test again.",
        _fixed_test,
        FIX_TEST,
    ),
    Task(
        "find-definition",
        "In which file is the function parse_date defined, and what does it return? "
        "Answer in one sentence.",
        _mentions("dates.py", "date"),
        {
            "app/__init__.py": "",
            "app/main.py": "from app.dates import parse_date\n\nprint(parse_date('2024-01-31'))\n",
            "app/dates.py": (
                "import datetime\n\n\ndef parse_date(text):\n"
                '    """Read YYYY-MM-DD."""\n'
                "    return datetime.date.fromisoformat(text)\n"
            ),
            "app/util.py": "def clamp(x, low, high):\n    return max(low, min(high, x))\n",
        },
    ),
    Task(
        "edit-constant",
        "In config.py, change TIMEOUT from 30 to 60. Leave everything else as it is.",
        _timeout_is_60,
        {"config.py": 'NAME = "service"\nTIMEOUT = 30\nRETRIES = 3\n'},
    ),
    Task(
        "count-lines",
        "How many lines does data.txt have? Answer with the number.",
        _mentions("37"),
        {"data.txt": "".join(f"row {n}\n" for n in range(1, 38))},
    ),
    Task(
        "json-file",
        'Create a file settings.json holding a JSON object with name set to "demo" and debug '
        "set to true.",
        _settings,
    ),
    Task(
        "add-function",
        "Add a function square(x) to mathutils.py that returns x * x. Keep double as it is.",
        _square_added,
        {"mathutils.py": "def double(x):\n    return 2 * x\n"},
    ),
    Task(
        "find-todo",
        "Which file in this folder contains a TODO comment? Answer with the file name.",
        _mentions("parser.py"),
        {
            "reader.py": "def read(path):\n    with open(path) as f:\n        return f.read()\n",
            "parser.py": (
                "def parse(text):\n    # TODO: handle empty input\n    return text.split()\n"
            ),
            "writer.py": "def write(path, text):\n    open(path, 'w').write(text)\n",
        },
    ),
    Task(
        "run-and-report",
        "Run compute.py and tell me the number it prints.",
        _mentions("2870"),
        {"compute.py": "print(sum(n * n for n in range(1, 21)))\n"},
    ),
)


def run_task(
    side: Side, task: Task, url: str, model: str, limit: float = TASK_SECONDS
) -> dict[str, Any]:
    """One side on one task in a fresh workspace: steps, seconds, and whether it is done."""
    with tempfile.TemporaryDirectory(prefix=f"task-{task.name}-") as tmp:
        workspace = Path(tmp)
        for name, text in task.files.items():
            (workspace / name).parent.mkdir(parents=True, exist_ok=True)
            (workspace / name).write_text(text)
        params = {
            "url": url,
            "model": model,
            "prompt": task.prompt,
            "workspace": str(workspace),
            "max_steps": MAX_STEPS,
        }
        command = [str(side.python), str(Path(__file__).parent / side.driver), "task"]
        started = time.monotonic()
        try:
            done = subprocess.run(
                [*command, json.dumps(params)],
                capture_output=True,
                text=True,
                timeout=limit,
                cwd=Path(__file__).parent,
            )
        except subprocess.TimeoutExpired:
            return {"ok": False, "why": f"still running after {limit:.0f} s", "seconds": limit}
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
            seconds = time.monotonic() - started
            return {"ok": False, "why": f"driver failed: {tail}", "seconds": seconds}
        outcome: dict[str, Any] = json.loads(lines[-1])
        why = outcome.get("error") or task.check(workspace, outcome.get("answer") or "")
        return {**outcome, "ok": why is None, "why": why}


def _cell(outcome: dict[str, Any]) -> str:
    steps = outcome.get("steps")
    parts = ["ok" if outcome["ok"] else f"FAIL ({str(outcome['why'])[:70]})"]
    if steps is not None:
        parts.append(f"{steps} steps")
    if outcome.get("seconds") is not None:
        parts.append(f"{outcome['seconds']:.0f} s")
    return ", ".join(parts)


def summary(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    done = [o for o in outcomes if o["ok"]]
    steps = [o["steps"] for o in outcomes if o.get("steps") is not None]
    seconds = [o.get("seconds") or 0.0 for o in outcomes]
    return {
        "solved": f"{len(done)} of {len(outcomes)}",
        "steps": f"{statistics.mean(steps):.1f}" if steps else "-",
        "seconds": sum(seconds),
    }


def loads(results: dict[str, list[dict[str, Any]] | str]) -> str:
    """The range of the load average each side's tasks began under ("talaria 3.1-5.0; ...")."""
    spans = []
    for label, outcomes in results.items():
        seen = [o["load"] for o in outcomes if "load" in o] if isinstance(outcomes, list) else []
        if seen:
            spans.append(f"{label} {min(seen):.1f}-{max(seen):.1f}")
    return "; ".join(spans) or "not sampled"


def rows(tasks: list[Task], results: dict[str, list[dict[str, Any]] | str]) -> list[Row]:
    """Per task a row of cells ("ok, 3 steps, 41 s"), then the totals."""

    def cells(pick: Callable[[list[dict[str, Any]]], Any]) -> dict[str, Any]:
        return {
            label: value if isinstance(value, str) else pick(value)
            for label, value in results.items()
        }

    table = []
    for number, task in enumerate(tasks):
        by_side = cells(lambda outcomes, n=number: _cell(outcomes[n]))
        table.append(_row(task.name, by_side, "count"))
    table.append(_row("tasks solved", cells(lambda o: summary(o)["solved"]), "count"))
    table.append(_row("model calls per task (mean)", cells(lambda o: summary(o)["steps"]), "count"))
    table.append(_row("time for all tasks", cells(lambda o: summary(o)["seconds"]), "s"))
    return table


def _row(metric: str, by_side: dict[str, Any], unit: str) -> Row:
    peers = {side.label: by_side[side.label] for side in SIDES[2:] if side.label in by_side}
    return Row(metric, by_side.get(TALARIA.label), by_side.get(HERMES.label), None, unit, peers)


def _server_json(url: str, endpoint: str) -> Any:
    """GET one of llama-server's own endpoints (/props, /slots) beside its /v1."""
    import urllib.request

    with urllib.request.urlopen(url.removesuffix("/v1") + endpoint, timeout=10) as answer:
        return json.load(answer)


def server_window(url: str) -> int | str:
    """The window the server really serves (llama-server's /props): a server started by hand
    has the window it was started with, not necessarily WINDOW."""
    try:
        return int(_server_json(url, "/props")["default_generation_settings"]["n_ctx"])
    except (OSError, ValueError, KeyError, TypeError):
        return "unknown (no /props)"


def wait_idle(url: str, limit: float = 600) -> None:
    """Wait until the server has dropped the request of a side that ran out of time: it stops
    only after the batch it is on (minutes for a long prompt on a loaded machine), and the next
    task's requests would queue behind it on the clock of another side."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if not any(slot.get("is_processing") for slot in _server_json(url, "/slots")):
                return
        except (OSError, ValueError, AttributeError):
            return  # no /slots: not a llama-server, nothing to wait for
        time.sleep(1)


def start_server(model: str, where: Path) -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = subprocess.run(
        ["bash", str(ROOT / "scripts" / "model_server.sh"), "start", model, str(port), str(where)],
        capture_output=True,
        text=True,
        timeout=3600,
        env={**os.environ, "PYTHON": sys.executable, "MODEL_CTX": str(WINDOW)},
    )
    if started.returncode != 0:
        raise SystemExit(f"the model server did not start: {started.stderr[-2000:]}")
    return started.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running OpenAI-compatible server (default: start one)")
    parser.add_argument("--size", default="1.5b", choices=["0.5b", "1.5b"])
    parser.add_argument("--model", help="the model name to send (default: the size's alias)")
    parser.add_argument("--only", nargs="*", choices=[side.key for side in SIDES])
    parser.add_argument("--tasks", nargs="*", choices=[task.name for task in TASKS])
    parser.add_argument(
        "--seconds",
        type=int,
        default=TASK_SECONDS,
        help=f"per task and side (default {TASK_SECONDS}; on a loaded machine cut it for all)",
    )
    args = parser.parse_args()
    model = args.model or f"qwen2.5-coder-{args.size}-instruct"
    tasks = [task for task in TASKS if not args.tasks or task.name in args.tasks]
    sides = [side for side in SIDES if not args.only or side.key in args.only]
    with tempfile.TemporaryDirectory(prefix="bench-llama-") as server_dir:
        url = args.url or start_server(args.size, Path(server_dir))
        window = server_window(url)
        try:
            results: dict[str, list[dict[str, Any]] | str] = {}
            for side in sides:
                missing = unavailable(side)
                if missing:
                    results[side.label] = missing
                    continue
                results[side.label] = []
                for task in tasks:
                    wait_idle(url)
                    load = os.getloadavg()[0]
                    outcome = {**run_task(side, task, url, model, args.seconds), "load": load}
                    print(f"{side.label:12} {task.name:18} {_cell(outcome)}", flush=True)
                    results[side.label].append(outcome)  # type: ignore[union-attr]
        finally:
            if not args.url:
                subprocess.run(["bash", str(ROOT / "scripts/model_server.sh"), "stop", server_dir])
    notes = {
        "model": f"{model} (Q4_K_M GGUF) on llama.cpp's llama-server, --ctx-size {window}, "
        "temperature 0 and seed 42 unless the side sends its own, "
        f"{os.environ.get('MODEL_THREADS') or os.cpu_count()} thread(s); the reference "
        "refuses windows under 64K, so its config states 64K (its own advice)",
        "load": "the machine was shared with other work (the 1-minute load average as each "
        f"task began: {loads(results)}): success and steps hold, times are under load (compare "
        "sides' times only where their loads were alike)",
        "steps": "model calls the side made for the task (its own count)",
        "limits": f"{MAX_STEPS} model calls and {args.seconds} s per task, the same for every side",
        "check": "the bench checks every outcome itself (files, output, the answer's facts)",
    }
    limited = "" if args.seconds == TASK_SECONDS else f", {args.seconds} s each"
    report(
        "tasks",
        f"{len(tasks)} small coding tasks on a local {args.size.upper()} model{limited}",
        rows(tasks, results),
        notes,
    )


if __name__ == "__main__":
    main()
