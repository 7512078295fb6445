"""`/<skill-name>` in the interactive chat: listed by /skills, sent with its instructions."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_skills import example_skill

from pty_terminal import answer_with, chat, last_user_text, provider  # noqa: F401
from talaria.testing.script import Reply


@pytest.mark.pty
def test_a_skill_is_listed_and_invoked_by_its_name(provider, chat, tmp_path: Path) -> None:  # noqa: F811
    example_skill(tmp_path / ".claude" / "skills")
    answer_with(provider, {"scripts/extract.py": Reply(text="Read it with the pdf skill.")})
    terminal = chat(toolsets="skills")

    terminal.send("/skills")
    terminal.expect("/pdf-tools")
    terminal.expect("Extract text and tables from PDF files")
    terminal.send("/pdf-tools summarise report.pdf")
    terminal.expect("Read it with the pdf skill.")

    sent = last_user_text(provider.requests[-1].body)
    assert sent.startswith("[The user invoked the skill /pdf-tools.")
    assert "Run `python scripts/extract.py FILE` from this folder" in sent
    assert sent.endswith("The user's request: summarise report.pdf")
    system = provider.requests[-1].body["messages"][0]["content"]
    assert "- pdf-tools: Extract text and tables" in system
    terminal.send("/no-such-skill")
    terminal.expect("unknown command /no-such-skill")
    terminal.assert_clean()
