"""Shared plumbing for the benches: the provider process, the sides' drivers, tables, results.

Every bench talks to a scripted provider running in its own process, so that no agent shares
a GIL with the server it measures against, and every agent faces the same server. Each peer
(the reference, hermes-agent 0.19, then pydantic-ai and the OpenAI Agents SDK) runs in its own
venv (bench/.venv-<peer>, made by setup_peers.sh) through its driver script; peers are
optional: when a venv is missing, that column says why instead of a number.
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
VENVS_DIR = BENCH_DIR
"""Where the peers' venvs are (bench/.venv-<peer>)."""
MODEL = "scripted-model"
SETUP = "bash bench/setup_peers.sh"


@dataclass(frozen=True)
class Side:
    """One implementation under test: its column label, interpreter and driver script."""

    key: str
    label: str
    venv: str | None
    """bench/.venv-<venv> holds it; None: the interpreter running the bench (talaria)."""
    driver: str

    @property
    def python(self) -> Path:
        if self.venv is None:
            return Path(sys.executable)
        return VENVS_DIR / f".venv-{self.venv}" / "bin" / "python"


TALARIA = Side("talaria", "talaria", None, "talaria_driver.py")
HERMES = Side("hermes", "hermes-agent 0.19", "hermes", "hermes_driver.py")
PYDANTIC_AI = Side("pydantic-ai", "pydantic-ai", "pydantic-ai", "pydantic_ai_driver.py")
AGENTS_SDK = Side("agents-sdk", "Agents SDK", "agents-sdk", "agents_sdk_driver.py")
PEERS = (HERMES, PYDANTIC_AI, AGENTS_SDK)
"""Compared with talaria, in table order; the first one is the reference."""

Plan = list[list[tuple[str, dict[str, Any]]]]
"""What the scripted model does in one turn: step i makes the tool calls in plan[i]; after the
last step it answers with text. The server picks the step from the request itself (how many
assistant messages follow the last user message), so one server serves any number of turns
and sessions, in any order, without shared state."""

NOOP_SCHEMA: dict[str, Any] = {
    "name": "noop",
    "description": "Do nothing and say ok.",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
}


def loop_message(i: int) -> dict[str, Any]:
    """Message `i` of a tool loop, of realistic size: an assistant call or the call's result."""
    if i % 2 == 0:
        args = json.dumps({"path": f"src/module_{i}.py", "offset": i})
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": args},
                }
            ],
        }
    return {
        "role": "tool",
        "tool_call_id": f"call_{i - 1}",
        "content": f"line {i}: def handler_{i}(request): return render(request) " * 6,
    }


def _vocabulary(seed: int, size: int = 4000) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(4, 9))) for _ in range(size)]


def search_corpus(sessions: int, per_session: int, seed: int = 7) -> Iterator[list[dict[str, Any]]]:
    """Sessions of user/assistant text (about 30 words a message, Zipf-like word use), the same
    for every backend because it is generated from the seed."""
    rng = random.Random(seed)
    words = _vocabulary(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    for _ in range(sessions):
        yield [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": " ".join(rng.choices(words, weights, k=30)),
            }
            for i in range(per_session)
        ]


def search_queries(count: int, seed: int = 7) -> list[str]:
    """A third each: one very common word (a huge match set to rank), a common word with a
    middling one, one rare word. Every query matches something in `search_corpus`."""
    rng = random.Random(seed + 1)
    words = _vocabulary(seed)
    common, middling, rare = words[:50], words[50:800], words[800:]
    queries = []
    for i in range(count):
        if i % 3 == 0:
            queries.append(rng.choice(common))
        elif i % 3 == 1:
            queries.append(f"{rng.choice(common)} {rng.choice(middling)}")
        else:
            queries.append(rng.choice(rare))
    return queries


def tool_loop_plan(steps: int, tool: str = "noop") -> Plan:
    """A turn of `steps` model calls: `steps - 1` single tool calls, then the answer. Each call
    has its own argument: agents may stop a model that repeats an identical call."""
    return [[(tool, {"n": i})] for i in range(steps - 1)]


def check_turns(side: str, turns: list[dict[str, Any]], full: int) -> None:
    """Refuse to report a turn that did not run the planned number of model calls."""
    for turn in turns:
        expected = turn.get("steps") or full
        if turn.get("api_calls") != expected:
            raise RuntimeError(
                f"{side}: a turn planned for {expected} model calls made "
                f"{turn.get('api_calls')} (final answer: {turn.get('final')!r})"
            )


class ReferenceUnavailable(RuntimeError):
    """The reference cannot be run; the message says why (shown in the table)."""


@dataclass
class ProviderProcess:
    """A `ScriptedProvider` serving `plan` from a child process (see bench/serve.py)."""

    plan: Plan
    delay: float = 0.0
    """Seconds the provider waits before each answer (a model's latency)."""
    tls: tuple[Path, Path] | None = None
    """(certificate, key): serve `https://` with them (see `self_signed_certificate`)."""
    url: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    _proc: subprocess.Popen[str] | None = None

    def start(self) -> ProviderProcess:
        keys = [str(path) for path in self.tls] if self.tls else []
        env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
        self._proc = subprocess.Popen(
            [
                sys.executable,
                str(BENCH_DIR / "serve.py"),
                json.dumps(self.plan),
                str(self.delay),
                *keys,
            ],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.startswith("http"):
            self._proc.kill()
            raise RuntimeError(f"scripted provider did not start (said {line!r})")
        self.url = line
        return self

    def arrivals(self) -> dict[str, float]:
        """When each turn's first request arrived since the last call (time.time(), by the
        JSON of the turn's first user message); see serve.py."""
        assert self._proc is not None and self._proc.stdin and self._proc.stdout
        self._proc.stdin.write("arrivals\n")
        self._proc.stdin.flush()
        taken: dict[str, float] = json.loads(self._proc.stdout.readline())
        return taken

    def stop(self) -> None:
        """Close the child's stdin (its signal to stop) and read its request statistics."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        out, _ = proc.communicate("", timeout=30)
        if out.strip():
            self.stats = json.loads(out.strip().splitlines()[-1])

    def __enter__(self) -> ProviderProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def unavailable(side: Side) -> str | None:
    """None when the side's interpreter is ready, else the reason it is not."""
    if not side.python.exists():
        return f"not installed: run {SETUP} {side.venv} (no {side.python})"
    return None


def reference_available() -> str | None:
    return unavailable(HERMES)


def run_side(side: Side, command: str, timeout: float = 900, **params: Any) -> dict[str, Any]:
    """Run one driver command in the side's interpreter and return its JSON answer."""
    reason = unavailable(side)
    if reason:
        raise ReferenceUnavailable(reason)
    proc = subprocess.run(
        [str(side.python), str(BENCH_DIR / side.driver), command, json.dumps(params)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(BENCH_DIR),
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise ReferenceUnavailable(f"{side.label}: {command} failed (rc={proc.returncode}): {tail}")
    answer: dict[str, Any] = json.loads(lines[-1])
    return answer


def run_reference(command: str, timeout: float = 600, **params: Any) -> dict[str, Any]:
    """Run one hermes_driver command in the reference venv and return its JSON answer."""
    return run_side(HERMES, command, timeout, **params)


def compile_talaria() -> None:
    """Write talaria's bytecode, as installing a wheel does. The peers run from installed
    packages whose bytecode pip wrote; an editable checkout run with PYTHONDONTWRITEBYTECODE
    set would otherwise compile its modules again at every start, and a start-up bench would
    time the compiler."""
    import compileall

    import talaria

    compileall.compile_dir(str(Path(talaria.__file__).parent), quiet=1)


def fresh_interpreter_seconds(
    python: str | Path, code: str, env: dict[str, str], cwd: str | Path
) -> tuple[float, float]:
    """Run `code` in a new interpreter, which prints its own elapsed seconds as its last line;
    return (that figure, the wall time of the whole process including interpreter start)."""
    start = time.perf_counter()
    proc = subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        cwd=str(cwd),
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{python} -c failed: {proc.stderr.strip()[-800:]}")
    return float(proc.stdout.strip().splitlines()[-1]), wall


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


@contextmanager
def stopwatch() -> Iterator[list[float]]:
    """`with stopwatch() as t:` ... then `t[0]` holds the elapsed seconds."""
    box: list[float] = []
    start = time.perf_counter()
    try:
        yield box
    finally:
        box.append(time.perf_counter() - start)


# ---- reporting ----------------------------------------------------------------------------

Cell = float | str | None


@dataclass
class Row:
    """One line of a comparison table. `reference` is hermes-agent's figure, `peers` the other
    peers' by label. `unit` says how figures read: seconds shown as "s", "ms" or "us", or
    "count", "bytes" (shown in KB/MB) or "x" (a plain factor)."""

    metric: str
    talaria: Cell
    reference: Cell = None
    floor: Cell = None
    unit: str = "ms"
    peers: dict[str, Cell] = field(default_factory=dict)

    def ratio(self, other: Cell = None) -> Cell:
        """other (default: the reference) / talaria: how many times cheaper talaria is (>1
        means talaria wins); None when either is not a figure or talaria's is zero."""
        other = self.reference if other is None else other
        if isinstance(self.talaria, float | int) and isinstance(other, float | int):
            return other / self.talaria if self.talaria > 0 else None
        return None

    def as_dict(self) -> dict[str, Any]:
        unit = "s" if self.unit in _SCALE else self.unit
        return {
            "metric": self.metric,
            "unit": unit,
            "talaria": self.talaria,
            "reference": self.reference,
            "ratio": self.ratio(),
            "floor": self.floor,
            "peers": {
                label: {"value": value, "ratio": self.ratio(value)}
                for label, value in self.peers.items()
            },
        }


def side_by_side(
    metric: str,
    key: str,
    ours: dict[str, Any],
    theirs: dict[str, dict[str, Any] | str],
    floor: Cell = None,
    unit: str = "ms",
) -> Row:
    """A row from each side's figures by `key`; a peer without figures has the reason (a
    string) in their place."""
    cells = {
        label: value[key] if isinstance(value, dict) else value for label, value in theirs.items()
    }
    reference = cells.pop(HERMES.label, None)
    return Row(metric, ours[key], reference, floor, unit, cells)


_SCALE = {"s": 1.0, "ms": 1e3, "us": 1e6}
_SMALLER = {"s": "ms", "ms": "us"}


def _fmt(value: Cell, unit: str) -> str:
    """A figure in the row's unit (seconds: a smaller unit when it would read 0.00x)."""
    if value is None or value != value:  # missing, or NaN
        return "-"
    if isinstance(value, str):
        return value
    if unit == "count":
        return f"{value:,.0f}"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "bytes":
        return f"{value / 1e6:.3g} MB" if abs(value) >= 1e6 else f"{value / 1e3:.3g} KB"
    while 0 < abs(value * _SCALE[unit]) < 0.1 and unit in _SMALLER:
        unit = _SMALLER[unit]
    scaled = value * _SCALE[unit]
    return f"{scaled:.0f} {unit}" if abs(scaled) >= 100 else f"{scaled:.3g} {unit}"


def _fmt_ratio(ratio: Cell) -> str:
    return f"{ratio:.1f}x" if isinstance(ratio, float) else "-"


def format_table(title: str, rows: Sequence[Row]) -> str:
    """Columns: talaria, the reference and its ratio, each other peer and its ratio (when
    any row has one), the floor."""
    labels = list(dict.fromkeys(label for row in rows for label in row.peers))
    header = ["metric", "talaria", "reference", "ratio (ref/talaria)"]
    for label in labels:
        header += [label, "ratio"]
    header.append("floor")
    body = []
    for row in rows:
        line = [
            row.metric,
            _fmt(row.talaria, row.unit),
            _fmt(row.reference, row.unit),
            _fmt_ratio(row.ratio()),
        ]
        for label in labels:
            value = row.peers.get(label)
            line += [_fmt(value, row.unit), _fmt_ratio(row.ratio(value))]
        line.append(_fmt(row.floor, row.unit))
        body.append(line)
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(header))]
    rule = ["-" * width for width in widths]
    lines = [f"## {title}", "", _table_line(header, widths), _table_line(rule, widths)]
    lines += [_table_line(line, widths) for line in body]
    return "\n".join(lines)


def _table_line(cells: Sequence[str], widths: Sequence[int]) -> str:
    padded = (cell.ljust(width) for cell, width in zip(cells, widths, strict=True))
    return "| " + " | ".join(padded) + " |"


def write_results(name: str, rows: Sequence[Row], notes: dict[str, Any], title: str = "") -> Path:
    """Write bench/results/<name>.json (gitignored) with the rows and how they were made;
    `python bench/performance_page.py --publish` turns them into docs/performance.md."""
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    payload = {
        "bench": name,
        "title": title,
        "command": " ".join(["python", f"bench/{Path(sys.argv[0]).name}", *sys.argv[1:]]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load_average": os.getloadavg(),
        },
        "rows": [row.as_dict() for row in rows],
        "notes": notes,
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def report(name: str, title: str, rows: Sequence[Row], notes: dict[str, Any]) -> str:
    """Print the table and the notes, write the JSON; return the table text."""
    table = format_table(title, rows)
    print(table)
    for key, value in notes.items():
        print(f"- {key}: {value}")
    print(f"- load average (1, 5, 15 min): {os.getloadavg()} on {os.cpu_count()} cpus")
    path = write_results(name, rows, notes, title)
    shown = path.relative_to(BENCH_DIR.parent) if path.is_relative_to(BENCH_DIR.parent) else path
    print(f"(results: {shown})\n")
    return table


def first_tool_call(lines: Any) -> dict[str, Any] | None:
    """The first tool call in an SSE chat stream, or None when the model answered in text."""
    call: dict[str, Any] | None = None
    for line in lines:
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        for choice in json.loads(line[6:]).get("choices") or []:
            for delta in choice.get("delta", {}).get("tool_calls") or []:
                if call is None:
                    call = {
                        "id": delta["id"],
                        "type": "function",
                        "function": {"name": delta["function"]["name"], "arguments": ""},
                    }
                call["function"]["arguments"] += delta["function"].get("arguments") or ""
    return call
