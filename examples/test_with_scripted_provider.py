"""Testing your agent with `talaria.testing`: a scripted provider plays the model, so the test
needs no network and no key, and checks what a user would notice (the answer, the tool's
effect) and that every request was one a real provider accepts.

    python -m pytest examples/test_with_scripted_provider.py
"""

from __future__ import annotations

from pathlib import Path

from talaria import Agent, tool
from talaria.testing import ScriptedProvider, calls, text

SAVED: list[str] = []


@tool
def save_note(note: str) -> str:
    """Save a note for later.

    Args:
        note: the note's text
    """
    SAVED.append(note)
    return "saved"


def test_the_agent_saves_the_note_and_says_so(tmp_path: Path) -> None:
    script = [calls(("save_note", {"note": "buy milk"})), text("Noted: buy milk.")]
    with ScriptedProvider(script) as model:
        agent = Agent(
            model="scripted-model",
            base_url=model.openai_base_url,
            api_key="test",
            home=tmp_path,
            cwd=tmp_path,
            tools=[save_note],
        )
        with agent:
            answer = agent.chat("Remember to buy milk.")
    assert answer == "Noted: buy milk."
    assert SAVED == ["buy milk"]
    assert model.invalid_requests == []  # the history stayed valid for a strict provider
    assert "save_note" in str(model.requests[0].body["tools"])
