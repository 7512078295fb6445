"""A deadline for every model call (model.total_timeout): a stream that never ends is abandoned,
retried, then handed to the next provider."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import MODES, scripted_agent
from talaria.testing import Endless, ScriptedProvider, text

DEADLINE = {"model.total_timeout": 1.0, "retry.max_attempts": 2, "retry.base_delay": 0.05}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", MODES)
def test_an_endless_stream_ends_within_the_total_timeout(tmp_path: Path, mode: str) -> None:
    steps = [text("warm"), Endless(), Endless()]
    with (
        ScriptedProvider(steps) as server,
        scripted_agent(server, tmp_path, mode, config=DEADLINE) as agent,
    ):
        assert agent.chat("first") == "warm"
        result = agent.run_conversation(user_message="talk")  # endless without the deadline
    assert result["turn_exit_reason"] == "failed:timeout"
    assert "model.total_timeout" in result["error"]
    assert result["final_response"] is None
    assert len(server.requests) == 3, "a timeout is retried"
    roles = [m["role"] for m in result["messages"]]
    assert roles == ["user", "assistant", "user"], "no partial answer is kept"


@pytest.mark.timeout(120)
def test_an_endless_stream_falls_back_to_the_next_provider(tmp_path: Path) -> None:
    with (
        ScriptedProvider([Endless(), Endless()]) as endless,
        ScriptedProvider([text("from the fallback")]) as good,
    ):
        fallback = {
            "provider": "custom",
            "model": "scripted-model",
            "base_url": good.openai_base_url,
            "api_key": "k",
        }
        agent = scripted_agent(endless, tmp_path, config=DEADLINE, fallback_providers=[fallback])
        with agent:
            result = agent.run_conversation(user_message="talk")
    assert result["final_response"] == "from the fallback"
    assert len(endless.requests) == 2 and len(good.requests) == 1
