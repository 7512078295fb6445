"""The interactive chat in a pseudo-terminal: resume with the session's setup, /model away and
back, /undo and /retry that persist, /clear and /exit, tool output on screen, single-key
approvals, clarify answered on the input line, markdown in resumed history, usage of an
interrupted answer, a plugin's load failure shown before the first message, /compress saying
where the session continues."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from pty_terminal import Terminal, answer_with, chat, provider  # noqa: F401
from talaria.testing.script import Reply, ScriptedCall


def stored_user_messages(home: Path) -> list[str]:
    with sqlite3.connect(home / "state.db") as db:
        rows = db.execute("SELECT role, content FROM messages ORDER BY session_id, seq").fetchall()
    return [str(content) for role, content in rows if role == "user"]


@pytest.mark.pty
def test_resume_restores_the_endpoint_without_asking_for_a_model(provider, chat, tmp_path):
    answer_with(
        provider, {"pets": Reply(text="Noted: **Miso** the cat."), "name": Reply(text="Miso.")}
    )
    first = chat(toolsets="terminal")
    first.send("remember my pets")
    first.expect("Noted: Miso the cat.")
    first.settle()
    first.send("/exit")
    first.expect("resume with: talaria chat --resume ")
    assert first.wait_exit() == 0
    session_id = re.findall(r"--resume (\S+)", first.text)[-1]

    second = Terminal(["chat", "--resume", session_id], tmp_path / "home", tmp_path)
    second.expect(f"custom:scripted-model · {provider.openai_base_url}")
    second.expect("/help for commands")
    assert "needs a model" not in second.text
    second.expect("Noted: Miso the cat.")  # the resumed answer, rendered as markdown
    assert "**Miso**" not in second.text
    second.send("what is my cat's name?")
    second.expect("Miso.")
    body = provider.requests[-1].body
    assert body["model"] == "scripted-model"
    assert "terminal" in [tool["function"]["name"] for tool in body["tools"]]
    second.send("/quit")
    assert second.wait_exit() == 0
    second.assert_clean()


@pytest.mark.pty
def test_model_switches_to_another_provider_and_back(provider, chat):
    answer_with(provider, {"hello": Reply(text="hi from the local model")})
    terminal = chat()
    terminal.send("/model anthropic:claude-sonnet-4-5")
    terminal.expect("next message goes to anthropic:claude-sonnet-4-5")
    terminal.send("/model custom:scripted-model")
    terminal.expect(f"next message goes to custom:scripted-model · {provider.openai_base_url}")
    terminal.send("hello")
    terminal.expect("hi from the local model")
    terminal.send("/model")
    terminal.expect("● 1. start")
    terminal.send("/model anthropic:claude-sonnet-4-5")
    terminal.expect("next message goes to anthropic")
    terminal.send("/model scripted-model")
    terminal.expect("next message goes to custom:scripted-model")
    terminal.send("hello again")
    terminal.expect("hi from the local model")
    terminal.assert_clean()


@pytest.mark.pty
def test_undo_and_retry_persist_and_usage_stays(provider, chat, tmp_path):
    answer_with(
        provider,
        {"first": Reply(text="first answer"), "second": Reply(text="second answer")},
    )
    terminal = chat()
    terminal.send("first question")
    terminal.expect("first answer")
    terminal.send("second question")
    terminal.expect("second answer")
    terminal.send("/undo")
    terminal.expect("undone: second question")
    terminal.send("/usage")
    terminal.expect("session total")
    assert "no usage yet" not in terminal.text
    terminal.send("/retry")
    terminal.expect("retrying: first question")
    terminal.expect("first answer")
    terminal.settle()
    assert stored_user_messages(tmp_path / "home") == ["first question"]
    terminal.send("/clear")
    terminal.expect("screen cleared")
    terminal.send("/exit")
    assert terminal.wait_exit() == 0
    sent = [m["content"] for m in provider.requests[-1].body["messages"] if m["role"] == "user"]
    assert sent == ["first question"]
    terminal.assert_clean()


@pytest.mark.pty
def test_tool_output_shows_its_first_lines_and_output_shows_all(provider, chat):
    command = "printf 'line-1\\nline-2\\nline-3\\nline-4\\nline-5\\n'"
    answer_with(
        provider, {"print": Reply(tool_calls=[ScriptedCall("terminal", {"command": command})])}
    )
    terminal = chat(toolsets="terminal")
    terminal.send("print lines")
    terminal.expect("✓ terminal printf")
    terminal.expect("│ line-1")
    terminal.expect("│ line-3")
    terminal.expect("more lines (/output)")
    terminal.expect("done:")
    assert "│ line-4" not in terminal.text
    terminal.send("/output")
    terminal.expect("line-4")
    terminal.expect("line-5")
    terminal.assert_clean()


@pytest.mark.pty
def test_an_approval_takes_a_single_key(provider, chat, tmp_path):
    (tmp_path / "build").mkdir()
    answer_with(
        provider,
        {"clean": Reply(tool_calls=[ScriptedCall("terminal", {"command": "rm -rf build"})])},
    )
    terminal = chat(toolsets="terminal")
    terminal.send("clean up")
    terminal.expect("allow? [o]nce [s]ession [a]lways [d]eny")
    terminal.child.send("o")  # no Enter
    terminal.expect("→ once")
    terminal.expect("✓ terminal rm -rf build")
    assert not (tmp_path / "build").exists()
    terminal.assert_clean()


@pytest.mark.pty
def test_an_interrupted_answer_counts_its_tokens(provider, chat):
    words = "".join(f"paragraph {number}.\n\n" for number in range(200))
    answer_with(provider, {"long": Reply(text=words, chunk_size=12, chunk_delay=0.05)})
    terminal = chat()
    terminal.send("a long answer please")
    terminal.expect("paragraph 3.")
    terminal.child.send("\x03")
    terminal.expect("interrupted")
    terminal.settle()
    terminal.send("/usage")
    terminal.expect("session total, sub-agents included: ")
    terminal.expect(" in · ")
    total = terminal.text[terminal.text.rfind("sub-agents included: ") :]
    assert not total.removeprefix("sub-agents included: ").startswith("0 in"), total
    terminal.assert_clean()


@pytest.mark.pty
def test_a_clarify_question_is_answered_on_the_input_line(provider, chat):
    ask = ScriptedCall("clarify", {"question": "Which colour?", "choices": ["red", "blue"]})
    answer_with(provider, {"paint": Reply(tool_calls=[ask])})
    terminal = chat(toolsets="clarify")
    terminal.send("paint the shed")
    terminal.expect("? Which colour?")
    terminal.expect("2. blue")
    terminal.send("2")
    terminal.expect("→ blue")
    terminal.expect("done: ")
    tool_results = [
        message["content"]
        for message in provider.requests[-1].body["messages"]
        if message["role"] == "tool"
    ]
    assert any("blue" in str(content) for content in tool_results), tool_results
    terminal.assert_clean()


@pytest.mark.pty
def test_a_plugin_that_did_not_load_is_a_notice_before_the_first_message(provider, chat, tmp_path):
    plugins = tmp_path / "home" / "plugins"
    plugins.mkdir(parents=True)
    (plugins / "leaving.py").write_text("import sys\nsys.exit(3)\n")
    terminal = chat()
    terminal.expect("it called sys.exit(3)")
    terminal.assert_clean()


@pytest.mark.pty
def test_compress_shows_where_the_session_continues(provider, chat, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("compression:\n  protect_last_n: 2\n")
    answer_with(provider, {"note": Reply(text="noted.")})
    terminal = chat()
    for number in range(4):
        terminal.send(f"note {number}: the build uses make")
        terminal.expect("noted.")
        terminal.settle()
    terminal.send("/compress")
    terminal.expect("continuing in session ")
    terminal.expect("· compressed ")
    terminal.assert_clean()
