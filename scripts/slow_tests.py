"""Write tests/slow.txt: the tests without a real service that take longest.

tests/conftest.py marks every test named there `slow`, so `pytest -m "not services and not
slow"` is the part a contributor runs in about a minute. Run this after adding tests that
start processes or loop long:

    python scripts/slow_tests.py                 # runs the suite's fast part once, timed
    python scripts/slow_tests.py --log FILE      # reads a `pytest --durations=0` output instead

A test is slow when its setup, call and teardown together take more than `--over` seconds
(all parameter sets of one test function count as one test).
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
    parser.add_argument("--log", type=Path, help="a pytest --durations=0 output to read")
    args = parser.parse_args()
    if args.log:
        output = args.log.read_text()
    else:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"]
        command += ["-m", "not services", "--durations=0"]
        output = subprocess.run(command, cwd=ROOT, capture_output=True, text=True).stdout
    slow = sorted(test for test, seconds in durations(output).items() if seconds > args.over)
    header = "# Written by scripts/slow_tests.py; tests/conftest.py marks these `slow`.\n"
    (ROOT / "tests" / "slow.txt").write_text(header + "".join(f"{t}\n" for t in slow))
    print(f"{len(slow)} slow tests written to tests/slow.txt", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
