"""Parallel tools: one model step asks for 3 tools that each sleep 0.5 s; wall time of the turn.

An agent that runs independent calls at once needs ~0.5 s (plus two model calls); one that
runs them in turn needs 1.5 s or more. The reference runs only tools on its read-only list in
parallel; any other tool (like this one, a user's own) runs sequentially with `tool_delay`
(1 s by default) between calls. The table shows both its default and its best case (the tool
added to its parallel-safe list). Each agent is timed on turns after a warm-up turn.

Run: python bench/parallel_tools.py [--reps 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

from common import (
    MODEL,
    ProviderProcess,
    ReferenceUnavailable,
    Row,
    check_turns,
    median,
    report,
    run_reference,
    stopwatch,
)

NAP = 0.5
CALLS = 3
PLAN = [[("nap", {"seconds": NAP, "label": label}) for label in "abc"[:CALLS]]]


def _nap_tool() -> Any:
    from talaria import tool

    @tool
    def nap(seconds: float, label: str = "") -> str:
        """Sleep for a while.

        Args:
            seconds: how long to sleep.
            label: a name for this nap.
        """
        time.sleep(seconds)
        return f"rested {label}"

    return nap


def talaria_turns(url: str, reps: int) -> list[dict[str, Any]]:
    """Turns after a warm-up turn on one agent, so one-off setup is not counted."""
    from talaria import Agent

    turns = []
    with tempfile.TemporaryDirectory() as home:
        agent = Agent(
            model=MODEL,
            base_url=url,
            api_key="x",
            toolsets=[],
            tools=[_nap_tool()],
            home=home,
            cwd=home,
        )
        with agent:
            agent.run_conversation("warm up")
            for _ in range(reps):
                with stopwatch() as elapsed:
                    result = agent.run_conversation("go")
                turns.append(
                    {
                        "steps": 2,
                        "seconds": elapsed[0],
                        "api_calls": result["api_calls"],
                        "final": result["final_response"],
                    }
                )
    return turns


def _reference(url: str, reps: int, parallel_safe: bool, notes: dict[str, Any]) -> float | str:
    try:
        turns = run_reference("parallel", url=url, reps=reps, parallel_safe=parallel_safe)["turns"]
    except ReferenceUnavailable as exc:
        notes["reference"] = str(exc)
        return "unavailable"
    check_turns("reference", turns, 2)
    return median([t["seconds"] for t in turns])


def run(reps: int = 3, reference: bool = True) -> list[Row]:
    notes: dict[str, Any] = {"tools per step": CALLS, "sleep per tool (s)": NAP, "reps": reps}
    with ProviderProcess(PLAN) as provider:
        turns = talaria_turns(provider.url, reps)
        check_turns("talaria", turns, 2)
        best: float | str = "skipped"
        default: float | str = "skipped"
        if reference:
            best = _reference(provider.url, reps, True, notes)
            default = _reference(provider.url, reps, False, notes)
    ours = median([t["seconds"] for t in turns])
    rows = [
        Row("turn wall time (reference: tool marked parallel-safe)", ours, best, NAP, "s"),
        Row("turn wall time (reference: its default for a user tool)", ours, default, NAP, "s"),
    ]
    report("parallel_tools", f"Parallel tools ({CALLS} x {NAP} s sleep in one step)", rows, notes)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--no-reference", action="store_true")
    args = parser.parse_args()
    run(args.reps, reference=not args.no_reference)


if __name__ == "__main__":
    main()
