"""Loop overhead per step: a 40-step tool loop (39 calls of a no-op tool, then the answer).

Both agents face the same scripted provider (own process, zero delay) with the history growing
to ~80 messages. Each agent runs, on fresh agents, turns of 40 and of 2 model calls; the
marginal cost of a step is (T40 - T2) / 38, so one-off work (clients, database, system
prompt: talaria does it on the first turn, the reference in its constructor) cancels out.
The floor is the same request sequence posted with raw httpx streaming and no agent;
"overhead" is an agent's marginal step minus the floor's. Concurrent sessions run several
40-step turns at once in one process (talaria: asyncio tasks; reference: threads, as its
gateway does).

Run: python bench/loop_overhead.py [--steps 40] [--reps 5] [--sessions 4]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Callable
from typing import Any

from common import (
    MODEL,
    NOOP_SCHEMA,
    ProviderProcess,
    ReferenceUnavailable,
    Row,
    check_turns,
    first_tool_call,
    median,
    report,
    run_reference,
    stopwatch,
    tool_loop_plan,
)

SHORT = 2
"""Model calls in the short turn that is subtracted out (one tool step, then the answer)."""


def _noop_tool() -> Any:
    from talaria import tool

    @tool
    def noop(n: int) -> str:
        """Do nothing and say ok.

        Args:
            n: the step number (ignored).
        """
        return "ok"

    return noop


def _agent(url: str, home: str) -> Any:
    from talaria import Agent

    return Agent(model=MODEL, base_url=url, api_key="x", toolsets=[], tools=[_noop_tool()],
                 home=home, cwd=home)


def talaria_turns(url: str, reps: int, lengths: list[int]) -> list[dict[str, Any]]:
    """One warm-up turn, then `reps` rounds of one turn per length, each on a fresh agent."""
    turns = []
    with tempfile.TemporaryDirectory() as home:
        with _agent(url, home) as warm:
            warm.run_conversation("warm up")
        for _ in range(reps):
            for length in lengths:
                with _agent(url, home) as agent, stopwatch() as elapsed:
                    result = agent.run_conversation(f"steps={length}")
                turns.append({"steps": length, "seconds": elapsed[0],
                              "api_calls": result["api_calls"],
                              "messages": len(result["messages"]),
                              "final": result["final_response"]})
    return turns


def talaria_concurrent(url: str, sessions: int) -> float:
    """Wall seconds for `sessions` fresh agents each running one whole turn at the same time."""

    async def all_turns(agents: list[Any]) -> None:
        await asyncio.gather(*(agent.arun_conversation("go") for agent in agents))

    with tempfile.TemporaryDirectory() as home:
        warm = [_agent(url, home)]
        asyncio.run(all_turns(warm))  # lazy imports happen here, not in the measurement
        agents = [_agent(url, home) for _ in range(sessions)]
        with stopwatch() as elapsed:
            asyncio.run(all_turns(agents))
        for agent in warm + agents:
            agent.close()
    return elapsed[0]


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


def marginal_step(turns: list[dict[str, Any]], steps: int) -> float:
    """(median long turn - median short turn) / extra steps."""
    long = median([t["seconds"] for t in turns if t["steps"] == steps])
    short = median([t["seconds"] for t in turns if t["steps"] == SHORT])
    return (long - short) / (steps - SHORT)


def whole_turn_step(turns: list[dict[str, Any]], steps: int) -> float:
    return median([t["seconds"] for t in turns if t["steps"] == steps]) / steps


def _reference(url: str, steps: int, reps: int, sessions: int,
               notes: dict[str, Any]) -> tuple[list[dict[str, Any]] | None, float | None]:
    try:
        answer = run_reference("loop", url=url, reps=reps, lengths=[steps, SHORT])
        turns = answer["turns"]
        together = run_reference("concurrent", url=url, sessions=sessions)["seconds"]
    except ReferenceUnavailable as exc:
        notes["reference"] = str(exc)
        return None, None
    check_turns("reference", turns, steps)
    notes["messages the reference stored in its session database"] = answer["stored_messages"]
    notes["reference turns"] = [_summary(t) for t in turns]
    return turns, together


def run(steps: int = 40, reps: int = 5, ref_reps: int = 3, sessions: int = 4,
        reference: bool = True) -> list[Row]:
    lengths = [steps, SHORT]
    notes: dict[str, Any] = {"steps per turn": steps, "reps": reps, "reference reps": ref_reps,
                             "concurrent sessions": sessions}
    with ProviderProcess(tool_loop_plan(steps)) as provider:
        turns = talaria_turns(provider.url, reps, lengths)
        floor = floor_turns(provider.url, reps, lengths)
        together = talaria_concurrent(provider.url, sessions)
        ref_turns, ref_together = (_reference(provider.url, steps, ref_reps, sessions, notes)
                                   if reference else (None, None))
    notes["requests the provider served"] = provider.stats.get("requests")
    check_turns("talaria", turns, steps)
    notes["talaria turns"] = [_summary(t) for t in turns]
    floor_step = marginal_step(floor, steps)
    missing = "unavailable" if reference else "skipped"

    def ref(measure: Callable[[list[dict[str, Any]]], float]) -> float | str:
        return measure(ref_turns) if ref_turns is not None else missing

    step = marginal_step(turns, steps)
    ref_step = ref(lambda t: marginal_step(t, steps))
    per_session = sessions * steps
    rows = [
        Row("marginal wall time per step", step, ref_step, floor_step),
        Row("overhead per step (marginal - floor)", step - floor_step,
            ref_step - floor_step if isinstance(ref_step, float) else ref_step, 0.0),
        Row(f"whole {steps}-step turn of a fresh agent, per step", whole_turn_step(turns, steps),
            ref(lambda t: whole_turn_step(t, steps)), whole_turn_step(floor, steps)),
        Row(f"{sessions} sessions at once, wall per step", together / per_session,
            ref_together / per_session if ref_together is not None else missing),
    ]
    report("loop_overhead", f"Loop overhead ({steps}-step tool loop)", rows, notes)
    return rows


def _summary(turn: dict[str, Any]) -> str:
    return (f"steps={turn['steps']} {turn['seconds']:.3f}s api_calls={turn['api_calls']} "
            f"messages={turn['messages']} final={turn['final']!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--ref-reps", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--no-reference", action="store_true")
    args = parser.parse_args()
    run(args.steps, args.reps, args.ref_reps, args.sessions, reference=not args.no_reference)


if __name__ == "__main__":
    main()
