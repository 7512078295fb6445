"""The repair pass checks each appended message once, and repairs outside histories as before.

A 150-step tool loop must not re-check its old messages on every request (the count of
checks grows with the history, not with its square), while a broken history that comes from
outside (resume, `conversation_history`, another writer) is still repaired exactly as
`repair_history` repairs it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from helpers import add
from talaria import Agent
from talaria.loop.prepare import build_messages
from talaria.loop.session import SessionHandle
from talaria.messages.repair import MISSING_RESULT, repair_history
from talaria.messages.validate import history_problems
from talaria.testing import ScriptedModel, call, text

STEPS = 150


def _step(n: int) -> list[dict[str, Any]]:
    arguments = f'{{"a": {n}, "b": 1}}'
    return [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{n}", "type": "function",
             "function": {"name": "add", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": str(n + 1)},
    ]  # fmt: skip


BROKEN = [
    {"role": "user", "content": "one"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_orphan", "type": "function",
         "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]},
    {"role": "tool", "tool_call_id": "call_nobody", "content": "stray result"},
    {"role": "user", "content": "two"},
    {"role": "user", "content": ""},
]  # fmt: skip


def test_a_150_step_history_checks_each_message_once() -> None:
    session = SessionHandle("s", None, system_prompt="You help.")

    async def run() -> list[list[dict[str, Any]]]:
        await session.append({"role": "user", "content": "count"})
        sent = [build_messages(session.system_prompt, session.history, [], repair=session.repair)]
        for n in range(STEPS):
            await session.append(*_step(n))
            sent.append(
                build_messages(session.system_prompt, session.history, [], repair=session.repair)
            )
        return sent

    sent = asyncio.run(run())
    messages = 2 + 2 * STEPS  # the system prompt, the user message, two per step
    assert session.repair.checks == messages, "each message checked exactly once"
    assert sent[-1] == [{"role": "system", "content": "You help."}, *session.history]
    assert all(history_problems(request) == [] for request in sent[::15])


def test_a_tool_loop_through_the_agent_stays_flat(tmp_path: Path) -> None:
    steps = [call("add", {"a": n, "b": 1}) for n in range(STEPS)]
    with Agent(
        model=ScriptedModel([*steps, text("counted")]), home=tmp_path, tools=[add],
        toolsets=[], max_iterations=STEPS + 5, config={"context.engine": "none"},
    ) as agent:  # fmt: skip
        result = agent.run_conversation(user_message="count to 150")
        checks = agent._session.repair.checks if agent._session else -1
    assert result["final_response"] == "counted"
    assert checks <= len(result["messages"]) + 1, "old messages were checked again"


def test_a_broken_outside_history_is_repaired_exactly_as_before() -> None:
    session = SessionHandle("s", None, system_prompt="You help.")

    async def run() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        await session.use_history(BROKEN)
        first = build_messages(session.system_prompt, session.history, [], repair=session.repair)
        await session.append({"role": "assistant", "content": "ok"})
        await session.append({"role": "user", "content": "three"})
        later = build_messages(session.system_prompt, session.history, [], repair=session.repair)
        return first, later

    first, later = asyncio.run(run())
    head = [{"role": "system", "content": "You help."}]
    assert first == repair_history(head + BROKEN).messages
    assert any(m.get("content") == MISSING_RESULT for m in first)
    assert later == [
        *first,
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "three"},
    ]
    assert history_problems(later) == []
    assert BROKEN[2]["content"] == "stray result", "the caller's history is never mutated"


def test_a_replaced_or_cut_history_is_repaired_whole_again() -> None:
    session = SessionHandle("s", None)

    async def run() -> list[dict[str, Any]]:
        await session.append({"role": "user", "content": "count"}, *_step(0), *_step(1))
        build_messages(None, session.history, [], repair=session.repair)
        session.history = session.history[:2]  # cut after a call: its result is gone
        return build_messages(None, session.history, [], repair=session.repair)

    cut = asyncio.run(run())
    assert cut[-1] == {"role": "tool", "tool_call_id": "call_0", "content": MISSING_RESULT}
    assert history_problems(cut) == []


def test_a_tail_that_breaks_a_rule_is_repaired() -> None:
    session = SessionHandle("s", None)

    async def run() -> list[dict[str, Any]]:
        await session.append({"role": "user", "content": "hi"})
        build_messages(None, session.history, [], repair=session.repair)
        await session.append({"role": "user", "content": "again"})  # two user turns in a row
        return build_messages(None, session.history, [], repair=session.repair)

    merged = asyncio.run(run())
    assert merged == repair_history(session.history).messages and len(merged) == 1
