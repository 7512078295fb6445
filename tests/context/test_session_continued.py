"""When compression continues a conversation in a child session, one `SessionContinued`
event says so, and what belongs to the session (the agent tools' session, the task list)
follows it without the compressor reaching into them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from talaria import Agent
from talaria.agent_tools.todo import TASK_LIST_TOOL
from talaria.events import Event, SessionContinued
from talaria.testing import Reply, Script, call
from talaria.testing.server import ScriptedProvider

SUMMARY = "The user greeted twice and asked for nothing yet."


def _step(body: dict[str, Any]) -> Reply:
    if "compress the middle" in str(body["messages"][0].get("content")):
        return Reply(text=SUMMARY)
    last = body["messages"][-1]
    if last["role"] == "user" and "plan" in str(last["content"]):
        return call("todo", {"todos": [{"id": "1", "content": "ship it", "status": "pending"}]})
    return Reply(text="noted")


def test_a_compression_is_one_event_and_the_task_list_follows_it(tmp_path: Path) -> None:
    seen: list[Event] = []
    with (
        ScriptedProvider(script=Script(fallback=_step)) as server,
        Agent(
            model="scripted-model",
            base_url=server.openai_base_url,
            api_key="k",
            tools=[TASK_LIST_TOOL],
            home=tmp_path,
            cwd=tmp_path,
            config={"compression.protect_last_n": 2},
        ) as agent,
    ):
        agent.subscribe(seen.append)
        for number in range(3):
            agent.run_conversation(f"hello {number} " + "words " * 40)
        parent = agent.session_id
        assert agent.compress()
        continued = [event for event in seen if isinstance(event, SessionContinued)]
        assert continued == [SessionContinued(str(parent), str(agent.session_id))]
        child = continued[0].session_id
        result = agent.run_conversation("make a plan")
        assert result["session_id"] == child
        assert agent.store.get_state(child, "todos")[0]["content"] == "ship it"
        assert not agent.store.get_state(str(parent), "todos")
    assert server.invalid_requests == []
