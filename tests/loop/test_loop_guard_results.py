"""The loop guard counts a repeat only when the call and its result are the same: polling a process
whose output changes is not a loop."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from helpers import scripted_agent, tool_results
from talaria.testing import ScriptedProvider, call, text
from talaria.testing.script import Reply


def test_ten_polls_of_a_process_whose_output_changes_all_run(tmp_path: Path) -> None:
    def poll(body: dict[str, Any]) -> Reply:
        started = next(m for m in body["messages"] if m.get("role") == "tool")["content"]
        process_id = re.search(r"background as (\S+)", started).group(1)  # type: ignore[union-attr]
        return Reply(
            tool_calls=call("process", {"action": "poll", "id": process_id}).tool_calls,
            delay=0.3,
        )

    command = "for i in $(seq 1 100); do echo line $i; sleep 0.1; done"
    server = ScriptedProvider(
        [call("terminal", {"command": command, "background": True}), *[poll] * 10, text("built")]
    )
    with (
        server,
        scripted_agent(
            server, tmp_path, toolsets=["terminal"], tools=[], config={"approvals.mode": "off"}
        ) as agent,
    ):
        result = agent.run_conversation(user_message="build and watch")
    polls = tool_results(result)[1:]
    assert result["turn_exit_reason"] == "text_response"
    assert len(polls) == 10 and all("recent output" in p for p in polls)
    assert len(set(polls)) == 10
