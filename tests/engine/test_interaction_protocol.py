"""Approvals and clarify as requests in the event protocol, answered through `agent.respond`."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from helpers import scripted_agent, tool_results
from talaria import events as ev
from talaria.testing import ScriptedProvider, calls, text


def _terminal_agent(server: ScriptedProvider, home: Path, **kwargs: Any):
    kwargs.setdefault("toolsets", ["terminal"])
    kwargs.setdefault("tools", [])
    return scripted_agent(server, home, **kwargs)


def test_two_parallel_approvals_are_both_visible_and_answered_through_the_protocol(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    server = ScriptedProvider(
        [
            calls(
                ("terminal", {"command": f"rm -rf {first}"}),
                ("terminal", {"command": f"rm -rf {second}"}),
            ),
            text("both gone"),
        ]
    )
    seen: list[ev.Event] = []
    both_pending = threading.Event()
    with server, _terminal_agent(server, tmp_path) as agent:

        def listener(event: ev.Event) -> None:
            seen.append(event)
            if len(agent.pending_requests) == 2:
                both_pending.set()

        agent.subscribe(listener, answers=("approval",))

        def front_end() -> None:
            assert both_pending.wait(120), "both requests must be pending at once"
            for request in agent.pending_requests:
                assert agent.respond(request.request_id, "once")

        answering = threading.Thread(target=front_end)
        answering.start()
        result = agent.run_conversation(user_message="delete both")
        answering.join(120)

    asked = [e for e in seen if isinstance(e, ev.ApprovalRequested)]
    resolved = [e for e in seen if isinstance(e, ev.RequestResolved)]
    assert {a.command for a in asked} == {f"rm -rf {first}", f"rm -rf {second}"}
    assert all(a.call_id and a.reason for a in asked)
    assert {r.request_id for r in resolved} == {a.request_id for a in asked}
    assert not first.exists() and not second.exists()
    assert result["final_response"] == "both gone"
    assert not any(isinstance(e, ev.RequestWithdrawn) for e in seen)


def test_a_timed_out_request_is_withdrawn_and_a_late_answer_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "keep"
    target.mkdir()
    server = ScriptedProvider([calls(("terminal", {"command": f"rm -rf {target}"}))])
    seen: list[ev.Event] = []
    with server, _terminal_agent(server, tmp_path, config={"approvals.timeout": 0.3}) as agent:
        agent.subscribe(seen.append, answers=("approval",))
        result = agent.run_conversation(user_message="delete it")
        (asked,) = [e for e in seen if isinstance(e, ev.ApprovalRequested)]
        assert agent.respond(asked.request_id, "once") is False
    (withdrawn,) = [e for e in seen if isinstance(e, ev.RequestWithdrawn)]
    assert (withdrawn.request_id, withdrawn.reason) == (asked.request_id, "timeout")
    assert seen.index(withdrawn) < next(
        i for i, e in enumerate(seen) if isinstance(e, ev.TurnFinished)
    )
    assert target.exists()
    assert result["turn_exit_reason"] == "halted:approval timed out"
    assert agent.pending_requests == []


def test_an_interrupt_withdraws_the_pending_request(tmp_path: Path) -> None:
    target = tmp_path / "keep"
    target.mkdir()
    server = ScriptedProvider([calls(("terminal", {"command": f"rm -rf {target}"}))])
    seen: list[ev.Event] = []
    with server, _terminal_agent(server, tmp_path) as agent:

        def listener(event: ev.Event) -> None:
            seen.append(event)
            if isinstance(event, ev.ApprovalRequested):
                threading.Timer(0.1, agent.interrupt).start()

        agent.subscribe(listener, answers=("approval",))
        result = agent.run_conversation(user_message="delete it")
    assert result["interrupted"]
    assert [e.reason for e in seen if isinstance(e, ev.RequestWithdrawn)] == ["interrupted"]
    assert target.exists()


def test_an_invalid_answer_is_a_clear_error_and_the_request_stays_pending(
    tmp_path: Path,
) -> None:
    target = tmp_path / "x"
    target.mkdir()
    server = ScriptedProvider([calls(("terminal", {"command": f"rm -rf {target}"})), text("ok")])
    errors: list[str] = []
    with server, _terminal_agent(server, tmp_path) as agent:

        def listener(event: ev.Event) -> None:
            if isinstance(event, ev.ApprovalRequested):
                try:
                    agent.respond(event.request_id, "maybe")
                except ValueError as error:
                    errors.append(str(error))
                agent.respond(event.request_id, "deny")

        agent.subscribe(listener, answers=("approval",))
        agent.run_conversation(user_message="delete it")
    assert errors and "once, session, always, deny" in errors[0]
    assert target.exists()


def test_clarify_is_a_request_answered_by_a_front_end(tmp_path: Path) -> None:
    server = ScriptedProvider(
        [calls(("clarify", {"question": "Which colour?", "choices": ["red", "blue"]})), text("k")]
    )
    with server:
        agent = scripted_agent(server, tmp_path, toolsets=["clarify"], tools=[])

        def listener(event: ev.Event) -> None:
            if isinstance(event, ev.ClarifyRequested):
                assert event.choices == ["red", "blue"]
                agent.respond(event.request_id, "blue")

        agent.subscribe(listener, answers=("clarify",))
        with agent:
            result = agent.run_conversation(user_message="paint it")
    assert tool_results(result) == ["The user answered: blue"]


def test_callbacks_still_work_as_adapters_over_requests(tmp_path: Path) -> None:
    target = tmp_path / "gone"
    target.mkdir()
    server = ScriptedProvider([calls(("terminal", {"command": f"rm -rf {target}"})), text("ok")])
    asked: list[Any] = []

    def approve(request: Any) -> str:
        asked.append(request)
        return "once"

    with server, _terminal_agent(server, tmp_path, approval_callback=approve) as agent:
        agent.run_conversation(user_message="delete it")
    assert asked[0].command == f"rm -rf {target}" and asked[0].request_id
    assert not target.exists()


def test_chat_inside_a_running_loop_names_achat(tmp_path: Path) -> None:
    server = ScriptedProvider([text("hello")])

    async def main() -> str:
        with server:
            agent = scripted_agent(server, tmp_path)
            with pytest.raises(RuntimeError, match="achat"):
                agent.chat("hi")
            answer = await agent.achat("hi")
            await agent.aclose()
            return answer

    assert asyncio.run(main()) == "hello"
