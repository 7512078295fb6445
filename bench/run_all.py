"""Run every side-by-side bench in turn, then check the figures against the project's targets.

Targets (from the performance issue): loop overhead per step at least 50x lower than the
reference's; import + construct at least 10x faster; persistence cost per step flat from 10 to
5,000 messages (here: the largest session's append costs at most 1.5x the smallest's);
session_search over 100,000 messages under 50 ms median. Takes ~6-8 minutes on 2 cores with
the reference installed (bench/setup_reference.sh).

Run: python bench/run_all.py [--no-reference]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence

import import_construct
import loop_overhead
import parallel_tools
import persistence
import session_search
from common import RESULTS_DIR, Row, stopwatch

FLAT = 1.5
"""Largest-to-smallest session append cost still counted as flat (timer noise is ~20%)."""


def _ratio_at_least(rows: Sequence[Row], index: int, wanted: float) -> tuple[bool | None, str]:
    row = rows[index]
    if isinstance(row.talaria, float) and row.talaria <= 0:
        return True, "talaria's figure is within timer noise of zero"
    ratio = row.ratio()
    if not isinstance(ratio, float):
        return None, f"no reference figure ({row.reference})"
    return ratio >= wanted, f"{ratio:.1f}x (want >= {wanted:.0f}x)"


def _flat(rows: Sequence[Row]) -> tuple[bool | None, str]:
    first, last = rows[0].talaria, rows[-1].talaria
    if not isinstance(first, float) or not isinstance(last, float):
        return None, "missing figure"
    growth = last / first
    return growth <= FLAT, f"{growth:.2f}x from smallest to largest (want <= {FLAT}x)"


def _search_fast(rows: Sequence[Row]) -> tuple[bool | None, str]:
    value = rows[0].talaria
    if not isinstance(value, float):
        return None, "missing figure"
    return value < 0.050, f"{value * 1e3:.1f} ms (want < 50 ms)"


Check = Callable[[], tuple[bool | None, str]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-reference", action="store_true")
    args = parser.parse_args()
    reference = not args.no_reference
    with stopwatch() as total:
        loop = loop_overhead.run(reference=reference)
        cold = import_construct.run(reference=reference)
        parallel_tools.run(reference=reference)
        store = persistence.run(reference=reference)
        search = session_search.run(reference=reference)
    checks: dict[str, Check] = {
        "loop overhead per step >= 50x lower": lambda: _ratio_at_least(loop, 1, 50),
        "import + construct >= 10x faster": lambda: _ratio_at_least(cold, 0, 10),
        "persistence flat from 10 to 5,000 messages": lambda: _flat(store),
        "session_search < 50 ms median over 100,000": lambda: _search_fast(search),
    }
    print("## Targets\n")
    summary = {}
    for name, check in checks.items():
        met, detail = check()
        verdict = {True: "met", False: "NOT met", None: "not measured"}[met]
        summary[name] = {"verdict": verdict, "detail": detail}
        print(f"- {name}: {verdict} ({detail})")
    print(f"\ntotal bench time: {total[0]:.0f} s")
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "targets.json").write_text(json.dumps(
        {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": total[0], "targets": summary},
        indent=2) + "\n")


if __name__ == "__main__":
    main()
