"""Text that cannot wedge a session: lone surrogates in arguments and file names, and a tool that
raises megabytes."""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers import add, scripted_agent, tool_results
from talaria import Agent
from talaria.testing import ScriptedProvider, call, calls, text


def test_lone_surrogates_in_text_arguments_and_file_names_leave_the_session_working(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / os.fsdecode(b"bad\xffname.txt")).write_text("needle\n")
    server = ScriptedProvider(
        [
            text("broken \ud83d text"),
            calls(("add", {"a": 1, "b": 2}), ("search_files", {"pattern": "needle"})),
            call("write_file", {"path": "note\udc80.txt", "content": "x\ud800y"}),
            text("still fine"),
        ]
    )
    server.start()
    agent = Agent(
        model="scripted-model",
        base_url=server.openai_base_url,
        api_key="k",
        home=tmp_path / "home",
        cwd=work,
        tools=[add],
        toolsets=["file"],
        config={"context.engine": "none"},
    )
    with server, agent:
        first = agent.run_conversation(user_message="say \udcff something")
        second = agent.run_conversation(user_message="search")
        stored = agent.store.load_messages(agent.session_id or "")
    assert first["completed"] and second["completed"], second.get("error")
    assert second["final_response"] == "still fine"
    assert "broken \ufffd text" in json.dumps(stored, ensure_ascii=False)
    assert any("bad\ufffdname.txt" in r for r in tool_results(second))
    assert server.invalid_requests == []
    assert len(stored) == len(second["messages"])


def test_a_tool_that_raises_megabytes_stores_a_capped_error(tmp_path: Path) -> None:
    from talaria import tool

    @tool
    def explode() -> str:
        """Fail loudly."""
        raise RuntimeError("x" * 5_000_000)

    server = ScriptedProvider([call("explode", {}), text("ok")])
    with server, scripted_agent(server, tmp_path, tools=[explode]) as agent:
        result = agent.run_conversation(user_message="go")
    (error,) = tool_results(result)
    assert error.startswith("Error: explode failed") and len(error) < 100_000
    assert len(json.dumps(server.requests[-1].body)) < 200_000
