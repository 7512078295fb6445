"""The loop guard: repeated or cyclic tool calls are warned about, then refused, then the turn
ends with a reason the user can read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from talaria import Agent, tool
from talaria.core import ToolCall
from talaria.loop.guard import LoopGuard, cycle_period, signature
from talaria.testing.script import Reply, ScriptedCall, StepSource, call, text
from talaria.testing.scripted_model import ScriptedModel

RUNS: list[dict[str, Any]] = []


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up
    """
    RUNS.append({"key": key})
    return f"value of {key}"


def make(name: str, arguments: str) -> ToolCall:
    return ToolCall(id=f"id_{len(arguments)}", name=name, arguments=arguments)


def test_equal_arguments_have_one_signature_whatever_their_spelling() -> None:
    assert signature(make("f", '{"a": 1, "b": 2}')) == signature(make("f", '{"b":2,"a":1}'))
    assert signature(make("f", '{"a": 1}')) != signature(make("g", '{"a": 1}'))
    assert signature(make("f", '{"a": 1')) == 'f {"a": 1', "invalid arguments count as they are"


def test_cycles_are_found_only_when_complete() -> None:
    assert cycle_period(["A", "A"]) is None
    assert cycle_period(["A", "A", "A"]) == 1
    assert cycle_period(["B", "A", "A", "A"]) == 1
    assert cycle_period(["A", "B", "A"]) is None
    assert cycle_period(["A", "B", "A", "B"]) == 2
    assert cycle_period(["A", "B", "C", "A", "B", "C"]) == 3
    assert cycle_period(["A", "A", "B", "A", "A", "B"]) == 3
    assert cycle_period(["A", "B", "C", "A", "B", "D"]) is None


def test_the_guard_warns_then_refuses_then_stops() -> None:
    guard = LoopGuard()
    same = make("lookup", '{"key": "x"}')
    for _ in range(2):
        assert guard.review([same]).refused == [] and guard.take_note() is None
    decision = guard.review([same])
    assert decision.refused == [] and decision.stop_reason is None
    note = guard.take_note()
    assert note is not None and "lookup" in note
    assert guard.take_note() is None, "the warning is sent once"
    assert guard.review([same]).refused == [0]
    final = guard.review([same, make("other", "{}")])
    assert final.stop_reason is not None and "lookup" in final.stop_reason
    assert final.refused == [0, 1]


def run(steps: list[StepSource], home: Path) -> tuple[dict[str, Any], ScriptedModel]:
    RUNS.clear()
    model = ScriptedModel(steps)
    with Agent(
        model=model,
        home=home,
        cwd=home,
        tools=[lookup],
        toolsets=[],
        config={"context.engine": "none"},
    ) as agent:
        return agent.run_conversation(user_message="find x"), model


def results(result: dict[str, Any]) -> list[str]:
    return [m["content"] for m in result["messages"] if m["role"] == "tool"]


def test_a_model_stuck_on_one_call_is_stopped(tmp_path: Path) -> None:
    steps: list[StepSource] = [call("lookup", {"key": "x"}) for _ in range(8)]
    result, model = run(steps, tmp_path)
    assert result["turn_exit_reason"] == "loop_detected"
    assert not result["completed"] and not result["failed"]
    assert "repeating" in result["final_response"] and "lookup" in result["final_response"]
    assert len(RUNS) == 3, "the call ran three times, then was refused"
    outcome = results(result)
    assert outcome[:3] == ["value of x"] * 3
    assert "loop guard" in outcome[3] and "not run" in outcome[4]
    assert len(model.requests) == 5
    assert "Loop guard" in str(model.requests[3].messages[-1]["content"])
    assert "Loop guard" not in str(result["messages"]), "the warning is ephemeral"


def test_an_alternating_cycle_is_caught(tmp_path: Path) -> None:
    steps: list[StepSource] = [call("lookup", {"key": key}) for key in "abababab"]
    result, _ = run(steps, tmp_path)
    assert result["turn_exit_reason"] == "loop_detected"
    assert [run["key"] for run in RUNS] == ["a", "b", "a", "b"]


def test_invalid_calls_count_too(tmp_path: Path) -> None:
    broken = Reply(tool_calls=[ScriptedCall("lookup", '{"key": ')])
    result, _ = run([broken] * 6, tmp_path)
    assert result["turn_exit_reason"] == "loop_detected"
    assert RUNS == []


def test_a_model_that_heeds_the_warning_finishes_normally(tmp_path: Path) -> None:
    steps: list[StepSource] = [call("lookup", {"key": "x"}) for _ in range(3)]
    result, _ = run([*steps, call("lookup", {"key": "y"}), text("x and y")], tmp_path)
    assert result["turn_exit_reason"] == "text_response"
    assert result["final_response"] == "x and y"
    assert [run["key"] for run in RUNS] == ["x", "x", "x", "y"]


def test_varied_calls_are_never_flagged(tmp_path: Path) -> None:
    steps: list[StepSource] = [call("lookup", {"key": str(n)}) for n in range(10)]
    result, _ = run([*steps, text("done")], tmp_path)
    assert result["turn_exit_reason"] == "text_response"
    assert len(RUNS) == 10


def test_the_guard_is_per_turn(tmp_path: Path) -> None:
    RUNS.clear()
    steps: list[StepSource] = []
    for answer in ("first", "second"):
        steps += [call("lookup", {"key": "x"}), call("lookup", {"key": "x"}), text(answer)]
    model = ScriptedModel(steps)
    with Agent(
        model=model,
        home=tmp_path,
        cwd=tmp_path,
        tools=[lookup],
        toolsets=[],
        config={"context.engine": "none"},
    ) as agent:
        agent.run_conversation(user_message="one")
        second = agent.run_conversation(user_message="two")
    assert second["final_response"] == "second"
    assert len(RUNS) == 4
