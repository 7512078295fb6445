"""Cold start: import the agent class and construct one agent, in a fresh interpreter each run.

The timer runs inside the child (`time.perf_counter()` around the import and the constructor),
median of 7 runs; the whole-process row also counts interpreter start and exit, which is what a
CLI user waits for. The floor is an interpreter that does nothing: its whole-process time is
Python's own start-up.

Run: python bench/import_construct.py [--runs 7]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from typing import Any

from common import (
    HERMES,
    MODEL,
    ProviderProcess,
    Row,
    compile_talaria,
    fresh_interpreter_seconds,
    median,
    reference_available,
    report,
)

TALARIA = (
    "import time; t = time.perf_counter(); from talaria import Agent; "
    "Agent(model={model!r}, base_url={url!r}, api_key='x', home={home!r}); "
    "print(time.perf_counter() - t)"
)
REFERENCE = (
    "import time; t = time.perf_counter(); from run_agent import AIAgent; "
    "AIAgent(base_url={url!r}, api_key='x', model={model!r}, quiet_mode=True); "
    "print(time.perf_counter() - t)"
)
FLOOR = "import time; t = time.perf_counter(); print(time.perf_counter() - t)"


def measure(
    python: str, code: str, runs: int, env: dict[str, str], cwd: str
) -> tuple[float, float]:
    """Median (in-process seconds, whole-process seconds) over `runs` fresh interpreters."""
    samples = [fresh_interpreter_seconds(python, code, env, cwd) for _ in range(runs)]
    return median([s[0] for s in samples]), median([s[1] for s in samples])


def run(runs: int = 7, reference: bool = True) -> list[Row]:
    notes: dict[str, Any] = {"runs": runs, "statistic": "median"}
    compile_talaria()
    with ProviderProcess([]) as provider, tempfile.TemporaryDirectory() as home:
        fields = {"model": MODEL, "url": provider.url, "home": home}
        env = {"TALARIA_HOME": home, "HERMES_HOME": home}
        ours = measure(sys.executable, TALARIA.format(**fields), runs, env, home)
        floor = measure(sys.executable, FLOOR, runs, env, home)
        theirs: tuple[Any, Any] = ("skipped", "skipped")
        if reference:
            reason = reference_available()
            if reason:
                theirs = ("unavailable", "unavailable")
                notes["reference"] = reason
            else:
                theirs = measure(str(HERMES.python), REFERENCE.format(**fields), runs, env, home)
    rows = [
        Row("import + construct (timed in process)", ours[0], theirs[0], floor[0], "s"),
        Row("whole process (python -c, wall)", ours[1], theirs[1], floor[1], "s"),
    ]
    report("import_construct", "Cold start: import + construct", rows, notes)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--no-reference", action="store_true")
    args = parser.parse_args()
    run(args.runs, reference=not args.no_reference)


if __name__ == "__main__":
    main()
