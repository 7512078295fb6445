"""Process start to first request: how long a fresh process takes to put its first model
request on the wire, for the library (`Agent(...).chat`), for `talaria chat -q` and for a raw
httpx POST (the floor: an interpreter, one HTTP library, no agent).

The scripted provider runs in this process's thread and notes when each request arrives;
the clock starts just before the child process is spawned. Each child gets a fresh, empty
home. Median of `--reps` runs, interleaved. The CPU time of each whole child process (user +
system) is reported too: on a busy machine it moves far less than wall time does.

Run: python bench/first_request.py [--reps 7]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import MODEL, Row, median, report

TALARIA = Path(sys.executable).with_name("talaria")
DEADLINE = 60.0
FLOOR_NAME = "raw httpx POST (floor)"

LIBRARY = (
    "import sys\nfrom talaria import Agent\n"
    "Agent(model=sys.argv[1], base_url=sys.argv[2], api_key='x', toolsets=[], home=sys.argv[3])"
    ".chat('hi')"
)
FLOOR = (
    "import sys, httpx\n"
    "httpx.post(sys.argv[2] + '/chat/completions', headers={'Authorization': 'Bearer x'},"
    " json={'model': sys.argv[1], 'stream': True,"
    " 'messages': [{'role': 'user', 'content': 'hi'}]}).raise_for_status()"
)


def _commands(url: str, home: str) -> dict[str, list[str]]:
    return {
        FLOOR_NAME: [sys.executable, "-c", FLOOR, MODEL, url, home],
        "library: Agent(...).chat": [sys.executable, "-c", LIBRARY, MODEL, url, home],
        "talaria chat -q": [str(TALARIA), "chat", "-q", "hi", "--model", MODEL, "--base-url",
                            url, "--api-key", "x", "--toolsets", "", "--home", home],
    }


def _first_request(server: object, argv: list[str]) -> tuple[float, float]:
    """Seconds from spawning ``argv`` until the server has its first request, and the CPU
    seconds the whole child used."""
    requests = server.requests  # type: ignore[attr-defined]
    seen = len(requests)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while len(requests) == seen:
        if child.poll() is not None or time.perf_counter() - start > DEADLINE:
            raise RuntimeError(f"{argv[0]} sent no request: {child.communicate()[1][-500:]}")
        time.sleep(0.0005)
    took = time.perf_counter() - start
    _, errors = child.communicate(timeout=DEADLINE)
    if child.returncode:
        raise RuntimeError(f"{argv[:3]} failed: {errors[-500:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return took, cpu


def run(reps: int = 7) -> list[Row]:
    from talaria.testing import Script, ScriptedProvider, text

    times: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    with ScriptedProvider(script=Script(fallback=lambda body: text("hello")), strict=False) as s:
        for _ in range(reps):
            with tempfile.TemporaryDirectory() as home:
                for name, argv in _commands(s.openai_base_url, home).items():
                    took, used = _first_request(s, argv)
                    times.setdefault(name, []).append(took)
                    cpu.setdefault(name, []).append(used)
    floor, floor_cpu = median(times[FLOOR_NAME]), median(cpu[FLOOR_NAME])
    rows = [Row(name, median(values), None, floor, unit="s") for name, values in times.items()]
    rows += [Row(f"{name}, CPU of the whole process", median(values), None, floor_cpu, unit="s")
             for name, values in cpu.items()]
    report("first_request", "Process start to first request", rows, {"reps": reps})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    run(parser.parse_args().reps)


if __name__ == "__main__":
    main()
