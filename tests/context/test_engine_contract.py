"""A user's own context engine (`context.engine: module:Class`) is a history processor: it
gets the history, a `Budget` and a summariser, and returns the history to continue with. The
loop does the rest: the summary call, the child session, `SessionContinued`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from talaria import Agent
from talaria.agent_tools.todo import TASK_LIST_TOOL
from talaria.config_schema import ConfigError
from talaria.context.engine import Budget, ContextEngine, Summarise
from talaria.core import Message
from talaria.events import Event, Notice, SessionContinued
from talaria.testing import Fail, ScriptedProvider, call, text

OVERFLOW = Fail(400, message="This model's maximum context length is 10 tokens")


class Recap(ContextEngine):
    """Replaces everything before the latest user message with the summariser's recap."""

    budgets: ClassVar[list[Budget]] = []
    requests: ClassVar[list[list[Message]]] = []

    async def process(
        self, history: list[Message], budget: Budget, summarise: Summarise
    ) -> list[Message]:
        Recap.budgets.append(budget)
        latest = max(i for i, m in enumerate(history) if m["role"] == "user")
        request: list[Message] = [
            {"role": "system", "content": "recap this conversation"},
            {"role": "user", "content": f"{latest} messages; focus: {budget.focus}"},
        ]
        Recap.requests.append(request)
        recap = await summarise(request)
        return [
            {"role": "user", "content": f"earlier: {recap}\n{budget.keep}"},
            {"role": "assistant", "content": "noted"},
            *history[latest:],
        ]


class OldStyle(ContextEngine):
    """The earlier contract at its smallest: the whole runtime and session before each
    request, and the provider's counts."""

    asked: ClassVar[list[tuple[str, int]]] = []

    def __init__(self, config: Any, runtime: Any) -> None:
        self.runtime = runtime

    async def before_request(self, rt: Any, session: Any, state: Any) -> None:
        assert rt is self.runtime
        OldStyle.asked.append((session.id, len(session.history)))

    def record_usage(self, usage: Any, message_count: int) -> None:
        pass


class Neither(ContextEngine):
    """Defines no `process` (nor the old `before_request`)."""


@pytest.fixture(autouse=True)
def fresh() -> None:
    Recap.budgets.clear()
    Recap.requests.clear()
    OldStyle.asked.clear()


def agent_on(server: ScriptedProvider, home: Path, engine: str, **config: Any) -> Agent:
    return Agent(
        model="scripted-model",
        base_url=server.openai_base_url,
        api_key="k",
        tools=[TASK_LIST_TOOL],
        home=home,
        cwd=home,
        config={"context.engine": f"{__name__}:{engine}", **config},
    )


def test_an_overflow_asks_the_engine_and_the_turn_goes_on_in_a_child(tmp_path: Path) -> None:
    seen: list[Event] = []
    with ScriptedProvider() as server:
        server.add(
            call("todo", {"todos": [{"id": "1", "content": "ship it", "status": "pending"}]}),
            text("planned"),
            OVERFLOW,
            text("the user asked for a plan"),
            text("fits now"),
        )
        with agent_on(server, tmp_path, "Recap") as agent:
            agent.subscribe(seen.append)
            first = agent.run_conversation("make a plan")
            result = agent.run_conversation("go on")
        assert result["final_response"] == "fits now"
        [budget] = Recap.budgets
        assert budget.trigger == "overflow" and budget.focus is None
        assert budget.window > 0 and budget.estimated > 0
        assert "ship it" in budget.keep
        # the summariser's request reached the model as the engine wrote it, without tools
        summary_request = server.requests[3].body
        assert summary_request["messages"][0]["content"] == "recap this conversation"
        assert "tools" not in summary_request
        # the retried request carries the new history
        retried = [m["content"] for m in server.requests[4].body["messages"]]
        assert retried[1:] == [
            "earlier: the user asked for a plan\n" + budget.keep,
            "noted",
            "go on",
        ]
    continued = [event for event in seen if isinstance(event, SessionContinued)]
    assert continued == [SessionContinued(first["session_id"], result["session_id"])]
    notes = [event.message for event in seen if isinstance(event, Notice)]
    assert any(f"continuing in session {result['session_id']}" in n for n in notes)
    assert server.invalid_requests == []


def test_compress_passes_the_users_focus(tmp_path: Path) -> None:
    with ScriptedProvider() as server:
        server.add(text("hello"), text("they said hi"))
        with agent_on(server, tmp_path, "Recap") as agent:
            agent.run_conversation("hi")
            parent = agent.session_id
            assert agent.compress("greetings")
            assert agent.session_id != parent
            stored = agent.store.load_messages(str(agent.session_id))
        [budget] = Recap.budgets
        assert budget.trigger == "manual" and budget.focus == "greetings"
        assert "focus: greetings" in str(Recap.requests[0][1]["content"])
        assert stored[0]["content"].startswith("earlier: they said hi")


def test_an_engine_without_process_is_refused(tmp_path: Path) -> None:
    with (
        ScriptedProvider() as server,
        agent_on(server, tmp_path, "Neither") as agent,
        pytest.raises(ConfigError, match="defines no process"),
    ):
        agent.run_conversation("hi")


def test_an_engine_of_the_old_contract_still_runs_deprecated(tmp_path: Path) -> None:
    with ScriptedProvider() as server:
        server.add(call("todo", {"todos": []}), text("done"))
        with (
            pytest.warns(DeprecationWarning, match=r"define process\(history, budget, summarise\)"),
            agent_on(server, tmp_path, "OldStyle") as agent,
        ):
            result = agent.run_conversation("tidy up")
            assert not agent.compress(), "it has no compress(): nothing changes"
            assert agent.session_id == result["session_id"]
    assert result["final_response"] == "done"
    assert OldStyle.asked == [(result["session_id"], 1), (result["session_id"], 3)]
