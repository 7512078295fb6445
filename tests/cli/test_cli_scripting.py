"""`talaria -p` as scripts use it: the real program (as a subprocess, or in a pseudo-terminal
when it matters whether stdout is a terminal) against the scripted HTTP provider."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pty_terminal import TALARIA, Terminal, answer_with, provider  # noqa: F401
from talaria import Agent
from talaria.testing import ScriptedModel
from talaria.testing.script import Fail, Reply, Script, ScriptedCall
from talaria.testing.server import ScriptedProvider


def talaria(
    home: Path, *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TALARIA_HOME": str(home)}
    env.pop("TALARIA_MODEL", None)
    return subprocess.run(
        [TALARIA, *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )


def endpoint(server: ScriptedProvider, *extra: str) -> list[str]:
    return ["-m", "scripted-model", "--base-url", server.openai_base_url, *extra]


def user_messages(server: ScriptedProvider) -> list[str]:
    return [m["content"] for m in server.requests[-1].body["messages"] if m["role"] == "user"]


def test_p_at_the_top_level_and_piped_stdin_as_context(provider, tmp_path):
    answer_with(provider, {"review": Reply(text="Looks fine.")})
    diff = "diff --git a/x.py b/x.py\n+print('hi')\n"
    done = talaria(tmp_path, "-p", "review this", *endpoint(provider, "--toolsets", ""), stdin=diff)
    assert (done.returncode, done.stdout, done.stderr) == (0, "Looks fine.\n", "")
    assert user_messages(provider)[-1] == f"review this\n\n<stdin>\n{diff.strip()}\n</stdin>"
    done = talaria(tmp_path, *endpoint(provider, "--toolsets", ""), stdin="review my plan\n")
    assert done.returncode == 0 and user_messages(provider)[-1] == "review my plan"
    done = talaria(tmp_path, "-q", "review", *endpoint(provider, "--toolsets", ""))
    assert done.returncode == 0 and user_messages(provider)[-1] == "review"
    empty = talaria(tmp_path, "-p", *endpoint(provider))
    assert empty.returncode == 2 and "no prompt" in empty.stderr


def test_stream_json_is_one_event_per_line_ending_with_the_result(provider, tmp_path):
    answer_with(
        provider,
        {"list": Reply(tool_calls=[ScriptedCall("terminal", {"command": "echo from-tool"})])},
    )
    done = talaria(
        tmp_path,
        "-p",
        "list it",
        "--output-format",
        "stream-json",
        *endpoint(provider, "--toolsets", "terminal"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    types = [record["type"] for record in records]
    assert types[0] == "turn_started" and types[-1] == "result"
    for expected in ("text_delta", "tool_started", "tool_finished", "step_finished"):
        assert expected in types
    started = next(r for r in records if r["type"] == "tool_started")
    assert started["name"] == "terminal" and started["arguments"] == {"command": "echo from-tool"}
    finished = next(r for r in records if r["type"] == "tool_finished")
    assert "from-tool" in finished["result"] and finished["is_error"] is False
    text = "".join(r["text"] for r in records if r["type"] == "text_delta")
    assert text.startswith("done: ")
    result = records[-1]
    assert result["exit_code"] == 0 and result["completed"] is True
    assert result["final_response"] == text
    assert result["usage"]["input_tokens"] > 0
    assert result["usage"]["estimated_cost_usd"] is None  # a custom endpoint's unknown model


def test_json_alias_and_cost_shown_the_same_on_success_and_failure(provider, tmp_path):
    local = ["--provider", "llamacpp"]
    answer_with(provider, {"hi": Reply(text="hello")})
    ok = talaria(tmp_path, "-p", "hi", "--json", *local, *endpoint(provider, "--toolsets", ""))
    assert json.loads(ok.stdout)["usage"]["estimated_cost_usd"] == 0.0
    provider.script = Script(fallback=lambda body: Fail(400, "bad request"))
    failed = talaria(tmp_path, "-p", "hi", "--output-format", "json", *local, *endpoint(provider))
    assert failed.returncode == 2
    result = json.loads(failed.stdout)
    assert result["failed"] is True and result["usage"]["estimated_cost_usd"] == 0.0
    # an unpriced model is null (never 0.0) whether the turn succeeds or fails
    for step in (Reply(text="ok"), Fail(400, "bad request")):
        with Agent(model=ScriptedModel([step]), home=tmp_path, toolsets=[]) as agent:
            usage = agent.run_conversation("hi")["usage"]
        assert usage["estimated_cost_usd"] is None


def test_exit_codes_are_documented_in_help(tmp_path):
    for args in (["--help"], ["chat", "--help"]):
        shown = talaria(tmp_path, *args).stdout
        for code in ("0 ", "1 ", "2 ", "130", "143"):
            assert f"  {code}" in shown, (args, code)
        assert "--output-format" in shown and "-p" in shown


def test_help_lists_every_command_and_each_command_has_its_own_help(tmp_path):
    """A run of one command builds only that command's options; help still shows them all."""
    from talaria.cli.main import COMMANDS

    listed = talaria(tmp_path, "--help")
    assert listed.returncode == 0
    for command in COMMANDS:
        assert re.search(rf"^    {command} +\S", listed.stdout, re.M), command
        own = talaria(tmp_path, command, "--help")
        assert own.returncode == 0 and own.stdout.startswith(f"usage: talaria {command}"), command
    assert "--base-url" in talaria(tmp_path, "-p", "--help").stdout


@pytest.mark.pty
def test_a_resume_that_matches_nothing_is_an_error_in_every_mode(provider, tmp_path):
    for args in (["chat", "-q", "hi", "--resume", "nosuch"], ["-p", "hi", "-r", "nosuch"]):
        done = talaria(tmp_path, *args, *endpoint(provider))
        assert done.returncode == 2 and "no session matches 'nosuch'" in done.stderr
    assert talaria(tmp_path, "sessions", "list").stdout.strip() == "no sessions yet"
    assert not (tmp_path / "state.db").exists()
    terminal = Terminal(["chat", "--resume", "nosuch", *endpoint(provider)], tmp_path, tmp_path)
    assert terminal.wait_exit() == 2
    assert "no session matches 'nosuch'" in terminal.text
    answer_with(provider, {"hi": Reply(text="hello")})
    assert talaria(tmp_path, "-p", "hi", *endpoint(provider)).returncode == 0
    again = talaria(tmp_path, "-p", "hi", "-r", "nosuch", *endpoint(provider))
    assert again.returncode == 2
    with sqlite3.connect(tmp_path / "state.db") as db:
        assert db.execute("SELECT count(*) FROM sessions").fetchone() == (1,)


def test_resume_restores_the_setup_and_a_given_flag_wins(provider, tmp_path):
    answer_with(provider, {"hi": Reply(text="hello"), "again": Reply(text="hello again")})
    first = talaria(tmp_path, "-p", "hi", *endpoint(provider, "--toolsets", "terminal"))
    assert first.returncode == 0
    tools = [tool["function"]["name"] for tool in provider.requests[-1].body["tools"]]
    assert "terminal" in tools and "read_file" not in tools
    resumed = talaria(tmp_path, "-c", "-p", "again")
    assert (resumed.returncode, resumed.stdout, resumed.stderr) == (0, "hello again\n", "")
    body = provider.requests[-1].body
    assert body["model"] == "scripted-model"
    assert [tool["function"]["name"] for tool in body["tools"]] == tools
    assert user_messages(provider) == ["hi", "again"]
    other = talaria(tmp_path, "-c", "-p", "again", "--model", "other-model")
    assert other.returncode == 0
    assert (
        "--model other-model given on the command line wins over the session's scripted-model"
        in other.stderr
    )
    assert provider.requests[-1].body["model"] == "other-model"


@pytest.mark.pty
def test_p_streams_the_answer_when_stdout_is_a_terminal(provider, tmp_path):
    slow = Reply(text="first words, then the rest, then the end.", chunk_size=6, chunk_delay=0.25)
    answer_with(provider, {"tell": slow})
    terminal = Terminal(
        ["-p", "tell me", *endpoint(provider, "--toolsets", "")], tmp_path, tmp_path
    )
    terminal.expect("first ")
    shown_early = terminal.text
    terminal.expect("the end.")
    assert "the end." not in shown_early, "the first words showed before the answer ended"
    assert terminal.wait_exit() == 0
    assert terminal.text.count("the end.") == 1


def test_the_lean_flag_and_small_windows_send_a_lean_prompt(tmp_path):
    answer_with_hi: dict[str, Any] = {"hi": Reply(text="hello")}
    with ScriptedProvider(script=Script(), n_ctx=4096) as small:
        answer_with(small, answer_with_hi)
        assert talaria(tmp_path, "-p", "hi", *endpoint(small)).returncode == 0
        lean = small.requests[-1].body
    with ScriptedProvider(script=Script()) as big:
        answer_with(big, answer_with_hi)
        assert talaria(tmp_path, "-p", "hi", *endpoint(big)).returncode == 0
        full = big.requests[-1].body
        assert talaria(tmp_path, "-p", "hi", "--lean", *endpoint(big)).returncode == 0
        flagged = big.requests[-1].body
    names = [[t["function"]["name"] for t in body["tools"]] for body in (lean, full, flagged)]
    assert names[0] == names[2] == ["terminal", "read_file", "write_file", "patch", "search_files"]
    assert len(names[1]) > len(names[0])
    assert len(json.dumps(lean)) < len(json.dumps(full)) / 3
    assert lean["messages"][0]["content"].startswith("You are talaria, a coding agent")


def test_an_unknown_window_is_not_warned_about_before_a_connection_error(tmp_path):
    done = talaria(tmp_path, "-p", "hi", "-m", "house-model", "--base-url", "http://127.0.0.1:9/v1")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "context window" not in done.stderr


def test_request_events_have_stable_stream_json_types() -> None:
    import io

    from talaria import events as ev
    from talaria.cli.stream_json import JsonLines

    out = io.StringIO()
    lines = JsonLines(out)
    for event in (
        ev.ApprovalRequested("r1", "c1", "terminal", "rm -rf build", "deletes", {}, "rm -rf build"),
        ev.ClarifyRequested("r2", "c2", "which file?", ["a", "b"]),
        ev.RequestResolved("r1", "approval", "once"),
        ev.RequestWithdrawn("r2", "clarify", "timeout"),
        ev.Notice("warning", "context compressed"),
    ):
        lines.event(event)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["type"] for r in records] == [
        "approval_requested",
        "clarify_requested",
        "request_resolved",
        "request_withdrawn",
        "notice",
    ]
    assert records[0]["command"] == "rm -rf build" and records[0]["choices"] == [
        "once",
        "session",
        "always",
        "deny",
    ]
    assert records[3]["reason"] == "timeout"


def test_doctor_shows_the_served_window_the_prompt_sizes_and_no_key_for_local(tmp_path, capsys):
    from talaria.cli.main import main

    with ScriptedProvider(script=Script(), n_ctx=4096) as small:
        home = tmp_path / "home"
        home.mkdir()
        (home / "config.yaml").write_text(
            f"model: {{default: qwen0.5, base_url: '{small.openai_base_url}'}}\n"
        )
        assert main(["doctor", "--home", str(home)]) == 0
    shown = capsys.readouterr().out
    assert "key        – not needed (local endpoint)" in shown
    prompt = next(line for line in shown.splitlines() if line.strip().startswith("prompt"))
    assert "window 4.1k · lean (auto: lean below 16.4k)" in prompt
    sizes = [
        int(float(n) * (1000 if k else 1)) for n, k in re.findall(r"~([\d.]+)(k?) tokens", prompt)
    ]
    assert len(sizes) == 2 and sizes[1] * 3 < sizes[0]
