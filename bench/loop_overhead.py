"""Cost per step of a tool loop (a no-op tool called on every step, then the answer), at 40
and at 150 steps, for talaria and each peer, with the raw-httpx floor measured in the same run.

Every side faces the same scripted provider (own process, zero delay, streaming Chat
Completions) with the history growing to ~300 messages, and runs in its own interpreter
(talaria_driver.py, hermes_driver.py, pydantic_ai_driver.py, agents_sdk_driver.py). Each side
runs, on fresh agents, turns of 150, 40 and 2 model calls; the marginal cost of a step is
(T_n - T_2) / (n - 2), so one-off work (clients, database, system prompt) cancels out. Steps
41-150 against steps 3-40 show how a step's cost grows with the history. The floor is the
same request sequence posted with raw httpx streaming and no agent; talaria's rounds and the
floor's alternate, one of each at a time, so that the ratio compares like with like.

Run: python bench/loop_overhead.py [--steps 40 150] [--reps 5] [--peer-reps 3] [--no-peers]
"""

from __future__ import annotations

import argparse
from typing import Any

from common import (
    MODEL,
    NOOP_SCHEMA,
    PEERS,
    TALARIA,
    ProviderProcess,
    ReferenceUnavailable,
    Row,
    Side,
    check_turns,
    first_tool_call,
    median,
    report,
    run_side,
    side_by_side,
    stopwatch,
    tool_loop_plan,
)

SHORT = 2
"""Model calls in the short turn that is subtracted out (one tool step, then the answer)."""


def floor_turns(url: str, reps: int, lengths: list[int]) -> list[dict[str, Any]]:
    """Raw httpx streaming of the same growing request sequence: no agent at all."""
    import httpx

    turns = []
    with httpx.Client(base_url=url, headers={"Authorization": "Bearer x"}) as client:
        _floor_turn(client, SHORT)
        for _ in range(reps):
            for length in lengths:
                with stopwatch() as elapsed:
                    _floor_turn(client, length)
                turns.append({"steps": length, "seconds": elapsed[0]})
    return turns


def _floor_turn(client: Any, length: int) -> None:
    tools = [{"type": "function", "function": NOOP_SCHEMA}]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful agent."},
        {"role": "user", "content": f"steps={length}"},
    ]
    while True:
        body = {"model": MODEL, "messages": messages, "stream": True, "tools": tools}
        with client.stream("POST", "/chat/completions", json=body) as response:
            call = first_tool_call(response.iter_lines())
        if call is None:
            return
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "ok"})


def marginal_step(
    turns: list[dict[str, Any]], steps: int, base: int = SHORT, key: str = "seconds"
) -> float:
    """(median turn of `steps` - median turn of `base`) / the steps in between."""
    long = median([t[key] for t in turns if t["steps"] == steps])
    short = median([t[key] for t in turns if t["steps"] == base])
    return (long - short) / (steps - base)


def step_figures(turns: list[dict[str, Any]], lengths: list[int]) -> dict[str, float]:
    """Marginal wall (and CPU, when measured) per step up to each length; with two lengths,
    the cost of the later steps against the earlier ones and the growth per step of history."""
    first, *later = lengths
    figures = {f"wall {n}": marginal_step(turns, n) for n in lengths}
    if "cpu" in turns[0]:
        figures |= {f"cpu {n}": marginal_step(turns, n, key="cpu") for n in lengths}
    if later:
        last = later[-1]
        early, late = figures[f"wall {first}"], marginal_step(turns, last, base=first)
        figures["late/early"] = late / early if early > 0 else float("nan")
        # mean step position of each range: (3 + first) / 2 and (first + 1 + last) / 2
        figures["growth"] = (late - early) / ((first + 1 + last) / 2 - (SHORT + 1 + first) / 2)
    return figures


def side_figures(
    side: Side, url: str, reps: int, lengths: list[int], notes: dict[str, Any]
) -> dict[str, float] | str:
    """The side's figures, or why it has none."""
    try:
        turns = side_turns(side, url, reps, lengths, notes)
    except ReferenceUnavailable as exc:
        notes[side.label] = str(exc)
        return "unavailable"
    return step_figures(turns, lengths)


def side_turns(
    side: Side, url: str, reps: int, lengths: list[int], notes: dict[str, Any]
) -> list[dict[str, Any]]:
    """`reps` rounds of the side's turns, in one interpreter; their summaries go to `notes`."""
    answer = run_side(side, "loop", url=url, reps=reps, lengths=[*lengths, SHORT])
    turns: list[dict[str, Any]] = answer["turns"]
    check_turns(side.label, turns, lengths[-1])
    notes.setdefault(f"{side.label} turns", []).extend(_summary(t) for t in turns)
    if "stored_messages" in answer:
        notes[f"messages {side.label} stored in its session database"] = answer["stored_messages"]
    return turns


def talaria_and_floor(
    url: str, reps: int, lengths: list[int], notes: dict[str, Any]
) -> tuple[dict[str, float], dict[str, float]]:
    """talaria's figures and the floor's, from rounds that alternate between the two: a slow
    minute of a shared machine then weighs on both sides of the ratio, not on one."""
    ours: list[dict[str, Any]] = []
    floor: list[dict[str, Any]] = []
    for _ in range(reps):
        try:
            ours += side_turns(TALARIA, url, 1, lengths, notes)
        except ReferenceUnavailable as exc:
            raise RuntimeError(f"talaria's side failed: {exc}") from None
        floor += floor_turns(url, 1, [*lengths, SHORT])
    return step_figures(ours, lengths), step_figures(floor, lengths)


def run(
    lengths: tuple[int, ...] = (40, 150), reps: int = 5, peer_reps: int = 3, peers: bool = True
) -> list[Row]:
    steps = sorted(lengths)
    notes: dict[str, Any] = {
        "turn lengths (model calls)": steps,
        "talaria reps": reps,
        "peer reps": peer_reps,
        "statistic": "median",
    }
    with ProviderProcess(tool_loop_plan(steps[-1])) as provider:
        ours, floor = talaria_and_floor(provider.url, reps, steps, notes)
        theirs = {
            side.label: side_figures(side, provider.url, peer_reps, steps, notes)
            if peers
            else "skipped"
            for side in PEERS
        }
    notes["requests the provider served"] = provider.stats.get("requests")
    rows = [
        _row(f"marginal wall time per step, steps 3-{n}", f"wall {n}", ours, floor, theirs)
        for n in steps
    ]
    rows += [
        _row(f"marginal CPU per step, steps 3-{n}", f"cpu {n}", ours, None, theirs) for n in steps
    ]
    if len(steps) > 1:
        rows.append(
            _row(
                f"steps {steps[0] + 1}-{steps[-1]} against steps 3-{steps[0]}",
                "late/early",
                ours,
                floor,
                theirs,
                "x",
            )
        )
        rows.append(
            _row(
                "growth of a step's wall time per step of history",
                "growth",
                ours,
                floor,
                theirs,
                "us",
            )
        )
    report(
        "loop_overhead",
        f"Cost per step ({' and '.join(map(str, steps))}-step tool loops)",
        rows,
        notes,
    )
    return rows


def _row(
    metric: str,
    key: str,
    ours: dict[str, float],
    floor: dict[str, float] | None,
    theirs: dict[str, dict[str, float] | str],
    unit: str = "ms",
) -> Row:
    return side_by_side(metric, key, ours, dict(theirs), floor[key] if floor else None, unit)


def _summary(turn: dict[str, Any]) -> str:
    return (
        f"steps={turn['steps']} {turn['seconds']:.3f}s cpu={turn['cpu']:.3f}s "
        f"api_calls={turn['api_calls']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[40, 150])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--peer-reps", type=int, default=3)
    parser.add_argument("--no-peers", action="store_true")
    args = parser.parse_args()
    run(tuple(args.steps), args.reps, args.peer_reps, peers=not args.no_peers)


if __name__ == "__main__":
    main()
