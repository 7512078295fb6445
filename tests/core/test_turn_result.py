"""The typed contract of a turn: what `run_conversation` returns matches `TurnResult`, and its
exit reason reads without string parsing."""

from __future__ import annotations

from pathlib import Path
from typing import get_type_hints

from helpers import scripted_agent
from talaria.core import TurnResult, exit_reason, failure_class, halt_reason
from talaria.core.messages import tool_calls_of
from talaria.testing import Fail, calls, text
from talaria.testing.server import ScriptedProvider

REQUIRED = TurnResult.__required_keys__


def _assert_is_turn_result(result: dict[str, object]) -> None:
    hints = get_type_hints(TurnResult)
    assert result.keys() >= REQUIRED
    assert result.keys() <= hints.keys()
    usage_keys = get_type_hints(hints["usage"]).keys()
    assert result["usage"].keys() == usage_keys  # type: ignore[attr-defined]


def test_a_completed_turn_is_a_turn_result(provider: ScriptedProvider, tmp_path: Path) -> None:
    provider.add(calls(("add", {"a": 2, "b": 3})), text("5"))
    with scripted_agent(provider, tmp_path) as agent:
        result = agent.run_conversation(user_message="2+3?")
    _assert_is_turn_result(result)
    assert exit_reason(result["turn_exit_reason"]) == "text_response"
    assert failure_class(result["turn_exit_reason"]) is None
    assert "error" not in result
    calls_made = [call for m in result["messages"] for call in tool_calls_of(m)]
    assert [call["function"]["name"] for call in calls_made] == ["add"]


def test_a_failed_turn_names_its_failure_class(provider: ScriptedProvider, tmp_path: Path) -> None:
    provider.add(Fail(401, "bad key"))
    with scripted_agent(provider, tmp_path) as agent:
        result = agent.run_conversation(user_message="hi")
    _assert_is_turn_result(result)
    assert result["failed"] and result["turn_exit_reason"] == "failed:auth"
    assert exit_reason(result["turn_exit_reason"]) == "failed"
    assert failure_class(result["turn_exit_reason"]) == "auth"
    assert result["error"]


def test_exit_reasons_read_by_kind_and_detail() -> None:
    assert exit_reason("halted:approval timed out") == "halted"
    assert halt_reason("halted:approval timed out") == "approval timed out"
    assert halt_reason("failed:auth") is None
    assert exit_reason("max_iterations_reached") == "max_iterations_reached"
    assert failure_class("failed:session_busy") == "session_busy"
    # A reason this release does not know (a batch task that crashed) reads as a failure.
    assert exit_reason("error") == "failed"
    assert failure_class("error") == "error"
