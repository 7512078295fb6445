"""Budgets in money and tokens: a scripted tool loop stops at the call the limit allows, with a
summary when one still fits; children spend from their parent's budget; an unknown price is
said once and not pretended to be enforced."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from helpers import scripted_agent
from talaria.config import ConfigError
from talaria.events import Notice
from talaria.testing import ScriptedProvider, call, calls, text

PRICED = "gpt-4o-mini"  # $0.15 per million input tokens, $0.60 per million output tokens
CALL_USAGE = {"input_tokens": 10_000, "output_tokens": 1_000}  # $0.0021 a call


def notices(into: list[str]) -> dict[str, Any]:
    def listen(event: object) -> None:
        if isinstance(event, Notice):
            into.append(event.message)

    return {"event_callback": listen}


def tool_loop(steps: int, **usage: Any) -> list[Any]:
    return [call("add", {"a": n, "b": 1}, usage=usage or CALL_USAGE) for n in range(steps)]


def sent_notes(server: ScriptedProvider) -> list[str]:
    return [json.dumps(request.body) for request in server.requests]


def test_a_cost_limit_stops_the_loop_at_the_right_call_with_a_summary(tmp_path: Path) -> None:
    # spent after n calls: n * $0.0021. Before call 4, one more call and a summary would make
    # $0.0105 > $0.01, so call 4 is the summary ($0.0084 in all) and call 5 never happens.
    with ScriptedProvider(model=PRICED) as server:
        server.add(*tool_loop(3), text("Summary: added three times.", usage=CALL_USAGE))
        server.add(*tool_loop(2))
        said: list[str] = []
        with scripted_agent(
            server, tmp_path, model=PRICED, config={"agent.max_cost_usd": 0.01}, **notices(said)
        ) as agent:
            result = agent.run_conversation("keep adding")
    assert result["turn_exit_reason"] == "budget_exceeded"
    assert result["final_response"] == "Summary: added three times."
    assert not result["completed"]
    assert len(server.requests) == 4
    assert "spending budget" in sent_notes(server)[3]
    assert "spending budget" not in sent_notes(server)[2]
    assert [m["role"] for m in result["messages"]].count("tool") == 3
    assert result["usage"]["estimated_cost_usd"] == pytest.approx(4 * 0.0021)
    assert any("$0.01 per turn (agent.max_cost_usd)" in note for note in said)


def test_a_token_limit_stops_without_a_summary_when_none_fits(tmp_path: Path) -> None:
    with ScriptedProvider() as server:
        server.add(*tool_loop(3, input_tokens=6_000, output_tokens=100))
        config = {"agent.max_tokens_per_turn": 5_000}
        with scripted_agent(server, tmp_path, config=config) as agent:
            result = agent.run_conversation("go")
    assert len(server.requests) == 1
    assert result["turn_exit_reason"] == "budget_exceeded"
    assert "5000 tokens per turn" in result["final_response"]
    assert result["messages"][-1]["role"] == "tool"  # the tool ran to the end: never mid-tool


def test_the_session_budget_counts_earlier_turns(tmp_path: Path) -> None:
    with ScriptedProvider(model=PRICED) as server:
        server.add(text("one", usage=CALL_USAGE), text("two", usage=CALL_USAGE))
        config = {"agent.max_session_cost_usd": 0.005}
        with scripted_agent(server, tmp_path, model=PRICED, config=config) as agent:
            assert agent.run_conversation("1")["turn_exit_reason"] == "text_response"
            second = agent.run_conversation("2")
            # $0.0021 spent; a call and a summary would pass $0.005: the summary alone fits
            assert second["turn_exit_reason"] == "budget_exceeded"
            assert second["final_response"] == "two"
            third = agent.run_conversation("3")
    assert third["turn_exit_reason"] == "budget_exceeded"
    assert "per session" in third["final_response"]
    assert len(server.requests) == 2


def test_children_spend_from_the_parents_budget(tmp_path: Path) -> None:
    steps = itertools.count()

    def answer(body: dict[str, Any]) -> Any:
        if "focused sub-agent" in json.dumps(body):  # a child that would never stop
            return call("read_file", {"path": f"notes-{next(steps)}.txt"}, usage=CALL_USAGE)
        return text("parent done", usage=CALL_USAGE)

    with ScriptedProvider(model=PRICED, steps=[]) as server:
        server.add(calls(("delegate_task", {"goal": "add forever"}), usage=CALL_USAGE))
        server.script._fallback = answer  # every later request: the child loops, the parent ends
        config = {"agent.max_cost_usd": 0.02, "delegation.max_iterations": 50}
        with scripted_agent(
            server, tmp_path, model=PRICED, config=config, toolsets=["delegation"]
        ) as agent:
            result = agent.run_conversation("delegate")
    report = next(m["content"] for m in result["messages"] if m["role"] == "tool")
    (child,) = json.loads(report)["results"]
    # The parent's $0.02 stops the child: after the parent's call and k child calls $0.0021
    # * (k + 1) is spent; at k = 7 one more call and a summary would pass $0.02, so the
    # child's 8th request is its summary. Then the parent has $0.0189 spent, and not even
    # its summary fits: it stops with a note, never asking the model again.
    assert child["exit_reason"] == "budget_exceeded"
    assert "spending budget" in json.dumps(server.requests[8].body)
    assert len(server.requests) == 1 + 7 + 1
    assert result["turn_exit_reason"] == "budget_exceeded"
    assert "no summary fits" in result["final_response"]
    assert result["usage"]["estimated_cost_usd"] == pytest.approx(9 * 0.0021)


def test_an_unknown_price_is_said_once_and_the_cost_limit_is_not_enforced(
    tmp_path: Path,
) -> None:
    with ScriptedProvider() as server:
        server.add(*tool_loop(4), text("done", usage=CALL_USAGE), text("again"))
        said: list[str] = []
        config = {"agent.max_cost_usd": 0.0001}
        with scripted_agent(server, tmp_path, config=config, **notices(said)) as agent:
            assert agent.run_conversation("go")["turn_exit_reason"] == "text_response"
            assert agent.chat("more") == "again"
    unpriced = [note for note in said if "no known price" in note]
    assert len(unpriced) == 1
    assert "cost budget is not enforced" in unpriced[0]


BAD_LIMIT = r"agent\.max_cost_usd: found .*, expected a positive number"


@pytest.mark.parametrize("value", [0, -1, "lots", True])
def test_a_bad_limit_is_one_clear_error(tmp_path: Path, value: object) -> None:
    with (
        ScriptedProvider() as server,
        pytest.raises(ConfigError, match=BAD_LIMIT),
    ):
        scripted_agent(server, tmp_path, config={"agent.max_cost_usd": value})
