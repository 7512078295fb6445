"""A turn whose steps each say something: the streamed text keeps the steps apart the way
the final answer does, and the two are the same text (the stream used to run them together,
"...the folder.The tool returned...", while the answer held the last step alone)."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from helpers import scripted_agent
from server_helpers import ServeProcess
from talaria.testing import ScriptedProvider, call, text

FIRST, SECOND = "I'll add them up.", "The tool says 5."
ANSWER = f"{FIRST}\n\n{SECOND}"


def _script(provider: ScriptedProvider) -> None:
    provider.add(call("add", {"a": 2, "b": 3}, text=FIRST), text(SECOND))


@pytest.mark.parametrize("mode", ["chat_completions", "codex_responses", "anthropic_messages"])
def test_the_stream_and_the_answer_are_the_same_text(
    provider: ScriptedProvider, tmp_path: Path, mode: str
) -> None:
    _script(provider)
    deltas: list[str] = []
    with scripted_agent(provider, tmp_path, mode, stream_delta_callback=deltas.append) as agent:
        result = agent.run_conversation("add 2 and 3")
    assert result["final_response"] == ANSWER
    assert "".join(deltas) == ANSWER


def test_a_step_without_text_adds_no_separator(provider: ScriptedProvider, tmp_path: Path) -> None:
    provider.add(call("add", {"a": 2, "b": 3}), text(SECOND))
    deltas: list[str] = []
    with scripted_agent(provider, tmp_path, stream_delta_callback=deltas.append) as agent:
        result = agent.run_conversation("add 2 and 3")
    assert result["final_response"] == "".join(deltas) == SECOND


def test_the_servers_streamed_and_whole_completions_agree(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    for _ in range(2):
        provider.add(call("terminal", {"command": "echo 5"}, text=FIRST), text(SECOND))
    with ServeProcess(provider, tmp_path / "home") as serve:
        client = openai.OpenAI(base_url=serve.url + "/v1", api_key=serve.key, max_retries=0)
        question = [{"role": "user", "content": "add 2 and 3"}]
        whole = client.chat.completions.create(model="talaria", messages=question)
        chunks = client.chat.completions.create(model="talaria", messages=question, stream=True)
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert whole.choices[0].message.content == streamed == ANSWER
