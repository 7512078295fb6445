"""End-to-end: the real `talaria` program in a pseudo-terminal (80 columns) against a real
scripted HTTP provider. What is asserted is what a user sees on the screen (escape codes
removed) and what reaches the provider.

The scripted model answers by trigger word: the reply for the trigger that appears last in the
newest user message, and "done: <result>" after a tool result, so a test does not depend on
how many requests the agent makes around the ones it cares about.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers import FOREVER
from pty_terminal import TALARIA, Terminal, answer_with, chat, provider  # noqa: F401
from talaria.testing.script import Reply, Script, ScriptedCall
from talaria.testing.server import ScriptedProvider


@pytest.mark.pty
def test_a_streamed_answer_appears_with_its_usage_footer(provider, chat):
    answer_with(
        provider,
        {
            "hello": Reply(
                text="Streaming **works** fine.",
                chunk_delay=0.03,
                chunk_size=4,
                usage={"input_tokens": 1500, "output_tokens": 12},
            )
        },
    )
    terminal = chat()
    terminal.send("hello there")
    terminal.expect("› hello there")
    terminal.expect("Streaming works fine.")
    terminal.expect("1.5k in · 12 out")
    terminal.send("/quit")
    assert terminal.wait_exit() == 0
    terminal.assert_clean()


@pytest.mark.pty
def test_a_tool_call_shows_its_progress_line(provider, chat, tmp_path):
    answer_with(
        provider,
        {"list": Reply(tool_calls=[ScriptedCall("terminal", {"command": "echo hello-from-tool"})])},
    )
    terminal = chat(toolsets="terminal")
    terminal.send("list it")
    terminal.expect("✓ terminal echo hello-from-tool")
    terminal.expect("done: ")
    terminal.expect("2 calls")
    terminal.assert_clean()


@pytest.mark.pty
def test_an_approval_accepts_once_and_the_command_runs(provider, chat, tmp_path):
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "out.o").write_text("x")
    answer_with(
        provider,
        {"clean": Reply(tool_calls=[ScriptedCall("terminal", {"command": "rm -rf build"})])},
    )
    terminal = chat(toolsets="terminal")
    terminal.send("clean up")
    terminal.expect("needs your approval")
    terminal.expect("rm -rf build")
    terminal.expect("allow? [o]nce [s]ession [a]lways [d]eny")
    terminal.send("o")
    terminal.expect("✓ terminal rm -rf build")
    terminal.expect("done:")
    assert not (tmp_path / "build").exists()
    terminal.assert_clean()


@pytest.mark.pty
def test_a_timed_out_approval_is_withdrawn_and_the_next_line_is_a_new_message(
    provider, chat, tmp_path
):
    (tmp_path / "build").mkdir()
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("approvals:\n  timeout: 1\n")
    answer_with(
        provider,
        {
            "clean": Reply(tool_calls=[ScriptedCall("terminal", {"command": "rm -rf build"})]),
            "yes": Reply(text="a fresh message, not an approval"),
        },
    )
    terminal = chat(toolsets="terminal")
    terminal.send("clean up")
    terminal.expect("needs your approval")
    terminal.expect("withdrawn")
    terminal.expect("stopped: approval timed out")
    terminal.send("yes")
    terminal.expect("a fresh message, not an approval")
    assert (tmp_path / "build").exists()
    terminal.assert_clean()


@pytest.mark.pty
def test_ctrl_c_interrupts_a_slow_call_and_the_next_question_works(provider, chat):
    answer_with(
        provider,
        {"slow": Reply(text="too late", delay=FOREVER), "quick": Reply(text="quick answer")},
    )
    terminal = chat()
    terminal.send("be slow")
    terminal.expect("thinking")
    terminal.send("quick one")
    terminal.expect("queued: quick one")
    terminal.child.send("\x03")
    terminal.expect("interrupted")
    terminal.expect("quick answer")
    terminal.send("quick again")
    terminal.expect("quick answer")
    assert "too late" not in terminal.text
    terminal.child.send("\x03")
    terminal.expect("press Ctrl+C again")
    terminal.settle()
    terminal.child.send("\x03")
    assert terminal.wait_exit() == 0
    terminal.assert_clean()


@pytest.mark.pty
def test_resume_reloads_a_past_session(provider, chat):
    answer_with(
        provider,
        {"pets": Reply(text="Noted: a cat named Miso."), "name": Reply(text="Your cat is Miso.")},
    )
    first = chat()
    first.send("remember my pets")
    first.expect("Noted: a cat named Miso.")
    first.send("/title pets")
    first.expect("titled “pets”")
    first.settle()
    first.child.sendeof()
    assert first.wait_exit() == 0

    second = chat()
    second.child.send("/res")
    second.expect("› /res")
    second.child.send("\t")
    second.send(" pets")
    second.expect("resumed “pets”")
    second.expect("remember my pets")
    second.send("what is my cat's name?")
    second.expect("Your cat is Miso.")
    sent = provider.requests[-1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"][-2:] == [
        "remember my pets",
        "what is my cat's name?",
    ]
    second.assert_clean()
    second.send("/quit")
    assert second.wait_exit() == 0

    third = chat("--continue")
    third.expect("resumed “pets”")
    third.expect("Your cat is Miso.")


@pytest.mark.pty
def test_unknown_commands_suggest_the_closest(chat):
    terminal = chat()
    terminal.send("/hepl")
    terminal.expect("unknown command /hepl — did you mean /help?")
    terminal.send("/help")
    terminal.expect("/resume [id|title]")
    terminal.assert_clean()


# ---- one shot: exact stdout, stderr and exit codes (no terminal) -------------------------


def oneshot(
    provider: ScriptedProvider, home: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TALARIA_HOME": str(home)}
    return subprocess.run(
        [
            TALARIA,
            "chat",
            "-m",
            "scripted-model",
            "--base-url",
            provider.openai_base_url,
            "--api-key",
            "k",
            "--toolsets",
            "",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_query_prints_only_the_answer(provider, tmp_path):
    answer_with(provider, {"capital": Reply(text="Paris.", chunk_delay=0.01)})
    done = oneshot(provider, tmp_path, "-q", "capital of France?")
    assert (done.returncode, done.stdout, done.stderr) == (0, "Paris.\n", "")


def test_query_json_is_the_result_dict(provider, tmp_path):
    answer_with(provider, {"capital": Reply(text="Paris.")})
    done = oneshot(provider, tmp_path, "-q", "capital of France?", "--json")
    assert done.returncode == 0 and done.stderr == ""
    result = json.loads(done.stdout)
    assert result["final_response"] == "Paris."
    assert result["completed"] is True and result["turn_exit_reason"] == "text_response"
    last = result["messages"][-1]
    assert (last["role"], last["content"]) == ("assistant", "Paris.")


def test_query_failures_exit_2_with_one_line_on_stderr(provider, tmp_path):
    from talaria.testing.script import Fail

    provider.script = Script(fallback=lambda body: Fail(401, "bad key"))
    done = oneshot(provider, tmp_path, "-q", "hello")
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("talaria: ")
    env = {**os.environ, "TALARIA_HOME": str(tmp_path / "empty")}
    env.pop("TALARIA_MODEL", None)
    unconfigured = subprocess.run(
        [TALARIA, "chat", "-q", "hello"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert unconfigured.returncode == 2 and unconfigured.stdout == ""
    assert "no model configured" in unconfigured.stderr
