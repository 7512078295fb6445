"""Run every side-by-side bench in turn, then check the figures against the project's targets and
print PASS or FAIL for each (figures only: nothing here is a test).

Targets: process start to first request at most 0.3 s, for the library
and for `talaria chat -q`, and at most 1.2x the floor's (a bare interpreter that
posts once) on an `http://` and on an `https://` endpoint alike, with a config file; per step at
most 1.5x the raw-httpx floor measured in the same run, and flat in history length (steps 41-150
cost at most 1.25x steps 3-40, or 1.1x the floor's own growth if that is larger); 1,000 sessions
in one process with zero failures, CPU per step at most 1.5x the sequential per-step cost, at
most 20 threads and at most 200 KB per idle agent. From earlier issues: persistence flat from 10
to 5,000 messages (the largest session's append at most 1.5x the smallest's) and session_search
over 100,000 messages under 50 ms median. Takes ~20 minutes on 2 cores with every peer installed
(setup_peers.sh).

Run: python bench/run_all.py [--no-peers] [--sessions 10 100 1000]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence

import first_request
import import_construct
import loop_overhead
import parallel_tools
import persistence
import session_search
import sessions
from common import RESULTS_DIR, Row, stopwatch

FLAT = 1.5
"""Largest-to-smallest session append cost still counted as flat (timer noise is ~20%)."""
START = 0.3
"""Seconds from process start to the first request."""
FLOOR_FACTOR = 1.5
FLOOR_START = 1.2
"""Process start to first request, over the floor's in the same variant."""
LATE_EARLY = 1.25
"""Later steps' cost over earlier steps' still counted as flat in history length."""

Verdict = tuple[bool | None, str]


def _row(rows: Sequence[Row], prefix: str) -> Row | None:
    return next((row for row in rows if row.metric.startswith(prefix)), None)


def _at_most(row: Row | None, limit: float, unit: str = "", scale: float = 1.0) -> Verdict:
    if row is None or not isinstance(row.talaria, float | int):
        return None, "not measured"
    shown = f"{row.talaria * scale:.3g}{unit} (want <= {limit * scale:.3g}{unit})"
    return row.talaria <= limit, shown


def _near_floor(rows: Sequence[Row]) -> Verdict:
    row = _row(rows, "marginal wall time per step, steps 3-40")
    if row is None or not isinstance(row.talaria, float) or not isinstance(row.floor, float):
        return None, "not measured"
    factor = row.talaria / row.floor
    return factor <= FLOOR_FACTOR, (
        f"{row.talaria * 1e3:.2f} ms = {factor:.2f}x the floor's "
        f"{row.floor * 1e3:.2f} ms (want <= {FLOOR_FACTOR}x)"
    )


def _flat_in_history(rows: Sequence[Row]) -> Verdict:
    row = _row(rows, "steps 41-150 against steps 3-40")
    if row is None or not isinstance(row.talaria, float) or not isinstance(row.floor, float):
        return None, "not measured"
    limit = max(LATE_EARLY, 1.1 * row.floor)
    return row.talaria <= limit, (
        f"later steps cost {row.talaria:.2f}x the earlier ones, the "
        f"floor's {row.floor:.2f}x (want <= {limit:.2f}x)"
    )


def _start_near_floor(rows: Sequence[Row], prefix: str) -> Verdict:
    row = _row(rows, prefix)
    if row is None:
        return None, "not measured"
    ours, bare = row.talaria, row.floor  # the floor's runs interleaved with this row's
    if not isinstance(ours, float) or not isinstance(bare, float):
        return None, "not measured"
    factor = ours / bare
    return factor <= FLOOR_START, (
        f"{ours:.3f} s = {factor:.2f}x the floor's {bare:.3f} s (want <= {FLOOR_START}x)"
    )


def _cpu_scales(rows: Sequence[Row], count: int) -> Verdict:
    at_n = _row(rows, f"N={count:,}: CPU per step")
    alone = _row(rows, f"N={count:,}: CPU per step, one session at a time")
    if at_n is None or alone is None or not isinstance(alone.talaria, float):
        return None, "not measured"
    if not isinstance(at_n.talaria, float):
        return None, "not measured"
    factor = at_n.talaria / alone.talaria
    return factor <= 1.5, (
        f"{at_n.talaria * 1e3:.1f} ms = {factor:.2f}x the sequential "
        f"{alone.talaria * 1e3:.1f} ms (want <= 1.5x)"
    )


def _flat(rows: Sequence[Row]) -> Verdict:
    first, last = rows[0].talaria, rows[-1].talaria
    if not isinstance(first, float) or not isinstance(last, float):
        return None, "missing figure"
    growth = last / first
    return growth <= FLAT, f"{growth:.2f}x from smallest to largest (want <= {FLAT}x)"


Check = Callable[[], Verdict]


def targets(
    start: Sequence[Row],
    loop: Sequence[Row],
    many: Sequence[Row],
    count: int,
    store: Sequence[Row],
    search: Sequence[Row],
) -> dict[str, Check]:
    n = f"N={count:,}"
    return {
        "library: process start to first request <= 0.3 s": lambda: _at_most(
            _row(start, "library: process start to first"), START, " s"
        ),
        "`talaria chat -q`: process start to first request <= 0.3 s": lambda: _at_most(
            _row(start, "`chat -q`: process start to first"), START, " s"
        ),
        **{
            f"{side}, {variant}: first request <= 1.2x the floor": (
                lambda side=side, variant=variant: _start_near_floor(
                    start, f"{variant}: {side}: process start to first"
                )
            )
            for variant in ("http + config", "https + config")
            for side in ("library", "`chat -q`")
        },
        "per step <= 1.5x the raw-httpx floor (40 steps)": lambda: _near_floor(loop),
        "per step flat in history length (150 steps)": lambda: _flat_in_history(loop),
        f"{count:,} sessions: zero failures": lambda: _at_most(_row(many, f"{n}: failures"), 0),
        f"{count:,} sessions: CPU per step <= 1.5x sequential": lambda: _cpu_scales(many, count),
        f"{count:,} sessions: at most 20 threads": lambda: _at_most(
            _row(many, f"{n}: threads"), 20
        ),
        f"{count:,} sessions: at most 200 KB per idle agent": lambda: _at_most(
            _row(many, f"{n}: memory per idle"), 200e3, " KB", 1e-3
        ),
        "persistence flat from 10 to 5,000 messages": lambda: _flat(store),
        "session_search < 50 ms median over 100,000": lambda: _at_most(
            search[0], 0.050, " ms", 1e3
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--sessions", type=int, nargs="+", default=[10, 100, 1000])
    args = parser.parse_args()
    peers = not args.no_peers
    with stopwatch() as total:
        loop = loop_overhead.run(peers=peers)
        start = first_request.run(peers=peers)
        import_construct.run(reference=peers)
        many = sessions.run(tuple(args.sessions), peers=peers)
        parallel_tools.run(reference=peers)
        store = persistence.run(reference=peers)
        search = session_search.run(reference=peers)
    checks = targets(start, loop, many, max(args.sessions), store, search)
    print("## Targets\n")
    summary = {}
    for name, check in checks.items():
        met, detail = check()
        verdict = {True: "PASS", False: "FAIL", None: "NOT MEASURED"}[met]
        summary[name] = {"verdict": verdict, "detail": detail}
        print(f"- {verdict}: {name} ({detail})")
    print(f"\ntotal bench time: {total[0]:.0f} s")
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "targets.json").write_text(
        json.dumps(
            {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": total[0], "targets": summary},
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
