"""Write tests/slow.txt: the tests without a real service that take longest.

tests/conftest.py marks every test named there `slow`, so `pytest -m "not services and not
slow"` is the part a contributor runs in about a minute. Run this after adding tests that
start processes or loop long:

    python scripts/slow_tests.py                 # runs the tests that need no service, timed
    python scripts/slow_tests.py --log FILE...   # reads outputs of pytest --durations=0 instead

A test is slow when its setup, call and teardown together take more than `--over` seconds
(all parameter sets of one test function count as one test). Given several logs, a test counts
with its quickest time among the logs that ran it: a machine busy with other work during one
run makes tests look slow that are not, and a cost paid once per process (a module-scoped
fixture, a cache) falls on whichever test runs first. Logs made with --durations-min=0 list
every test that ran; pytest leaves out those under 5 ms otherwise.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"^([\d.]+)s (?:call|setup|teardown)\s+(\S+?)(?:\[.*)?$")


def durations(output: str) -> Counter[str]:
    """Seconds per test function, from the lines `--durations=0` prints."""
    spent: Counter[str] = Counter()
    for line in output.splitlines():
        if match := LINE.match(line.strip()):
            spent[match.group(2)] += float(match.group(1))
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--over", type=float, default=0.25, help="seconds (default 0.25)")
    parser.add_argument("--log", type=Path, nargs="+", help="pytest --durations=0 outputs to read")
    args = parser.parse_args()
    if args.log:
        outputs = [log.read_text() for log in args.log]
    else:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"]
        command += ["-m", "not services", "--durations=0", "--durations-min=0"]
        outputs = [subprocess.run(command, cwd=ROOT, capture_output=True, text=True).stdout]
    quickest: dict[str, float] = {}
    for spent in map(durations, outputs):
        for test, seconds in spent.items():
            quickest[test] = min(seconds, quickest.get(test, seconds))
    slow = sorted(test for test, seconds in quickest.items() if seconds > args.over)
    header = "# Written by scripts/slow_tests.py; tests/conftest.py marks these `slow`.\n"
    (ROOT / "tests" / "slow.txt").write_text(header + "".join(f"{t}\n" for t in slow))
    print(f"{len(slow)} slow tests written to tests/slow.txt", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
