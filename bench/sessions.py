"""Many sessions in one process: N agents (one per session) each run a turn of 5 tool steps
and the answer at the same time, against a scripted provider that waits 200 ms before every
response (a model's latency).

Each side runs in its own interpreter (see driver_kit: talaria, pydantic-ai and the Agents SDK
as asyncio tasks on one event loop, hermes-agent with one thread per session as its gateway
does). Reported per N: wall time, CPU per model call (all the process's threads), the peak
thread count, peak resident memory, memory per idle agent (resident growth over the run with
every agent still alive, divided by N) and failures (sessions that raised or made another
number of model calls than planned). Before the concurrent run each side runs a few sessions
one at a time: that CPU per step is what "CPU per step at N" is compared against. The server
(own process) has a listen backlog of 1024, so a thousand clients connecting at once are
queued, not refused.

Run: python bench/sessions.py [--sessions 10 100 1000] [--reference-max 10] [--no-peers]
"""

from __future__ import annotations

import argparse
from typing import Any

from common import (
    PEERS,
    TALARIA,
    ProviderProcess,
    ReferenceUnavailable,
    Row,
    Side,
    report,
    run_side,
    side_by_side,
    tool_loop_plan,
)

TOOL_STEPS = 5
LATENCY = 0.2
"""Seconds the scripted model waits before each response."""
SEQUENTIAL = 3
"""Sessions run one at a time first, for the sequential CPU per step."""


def side_run(
    side: Side, url: str, count: int, sequential: int, notes: dict[str, Any]
) -> dict[str, Any] | str:
    """One side's figures at `count` sessions, or why there are none."""
    try:
        figures = run_side(
            side,
            "sessions",
            timeout=1800,
            url=url,
            sessions=count,
            steps=TOOL_STEPS + 1,
            sequential=sequential,
        )
    except ReferenceUnavailable as exc:
        notes[f"{side.label} at {count}"] = str(exc)
        return "unavailable"
    figures["peak_rss"] = max(figures["peak_rss"], figures["rss_after"])
    if figures["failures"]:
        notes[f"{side.label} failures at {count}"] = figures["failure_examples"]
    return figures


METRICS: list[tuple[str, str, str]] = [
    ("wall time", "wall_s", "s"),
    ("CPU per step", "cpu_per_step", "ms"),
    ("CPU per step, one session at a time", "sequential_cpu_per_step", "ms"),
    ("threads (peak)", "threads_peak", "count"),
    ("peak resident memory", "peak_rss", "bytes"),
    ("memory per idle agent", "idle_bytes_per_agent", "bytes"),
    ("failures", "failures", "count"),
]


def rows_for(
    count: int, ours: dict[str, Any], theirs: dict[str, dict[str, Any] | str]
) -> list[Row]:
    return [
        side_by_side(f"N={count:,}: {name}", key, ours, theirs, unit=unit)
        for name, key, unit in METRICS
    ]


def run(
    counts: tuple[int, ...] = (10, 100, 1000),
    reference_max: int = 10,
    peers: bool = True,
    latency: float = LATENCY,
    sequential: int = SEQUENTIAL,
) -> list[Row]:
    notes: dict[str, Any] = {
        "per session": f"{TOOL_STEPS} tool steps + the answer = {TOOL_STEPS + 1} model calls",
        "model latency per response": f"{latency * 1e3:.0f} ms",
        "sequential sessions before each run": sequential,
        "reference only up to": reference_max,
        "ratio": "peer / talaria (above 1: talaria uses less)",
    }
    rows: list[Row] = []
    with ProviderProcess(tool_loop_plan(TOOL_STEPS + 1), delay=latency) as provider:
        for count in counts:
            ours = side_run(TALARIA, provider.url, count, sequential, notes)
            if isinstance(ours, str):
                raise RuntimeError(f"talaria's side failed: {notes}")
            theirs: dict[str, dict[str, Any] | str] = {}
            for side in PEERS:
                skip = not peers or (side is PEERS[0] and count > reference_max)
                theirs[side.label] = (
                    "skipped" if skip else side_run(side, provider.url, count, sequential, notes)
                )
            rows += rows_for(count, ours, theirs)
    notes["requests the provider served"] = provider.stats.get("requests")
    report(
        "sessions",
        f"Sessions in one process ({TOOL_STEPS} tool steps each, "
        f"{latency * 1e3:.0f} ms model latency)",
        rows,
        notes,
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument(
        "--reference-max",
        type=int,
        default=10,
        help="largest N for hermes-agent (a thread and ~1 s of CPU per agent)",
    )
    parser.add_argument("--no-peers", action="store_true")
    args = parser.parse_args()
    run(tuple(args.sessions), args.reference_max, peers=not args.no_peers)


if __name__ == "__main__":
    main()
