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
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from talaria.testing.script import Reply, Script, ScriptedCall, Step
from talaria.testing.server import ScriptedProvider

TALARIA = str(Path(sys.executable).with_name("talaria"))
TIMEOUT = 20.0
ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>()][0-9A-B]?"
)
CPR_REQUEST = "\x1b[6n"


def last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "tool":
            return "TOOL RESULT " + str(message.get("content"))
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


class Responder:
    """A scripted model keyed by trigger words (see the module docstring)."""

    def __init__(self, replies: dict[str, Reply]) -> None:
        self.replies = replies

    def __call__(self, body: dict[str, Any]) -> Step:
        text = last_user_text(body)
        if text.startswith("TOOL RESULT "):
            return Reply(text="done: " + " ".join(text.removeprefix("TOOL RESULT ").split())[:60])
        found = [(text.rfind(word), word) for word in self.replies if word in text]
        if not found:
            return Reply(text="(no scripted answer)")
        return self.replies[max(found)[1]]


class Terminal:
    """A program in a pty; `expect` waits for text on the screen, escape codes removed."""

    def __init__(self, args: list[str], home: Path, cwd: Path) -> None:
        env = {
            **os.environ,
            "TALARIA_HOME": str(home),
            "TERM": "xterm-256color",
            "COLUMNS": "80",
            "LINES": "30",
        }
        env.pop("NO_COLOR", None)
        self.child = pexpect.spawn(
            TALARIA,
            args,
            env=env,
            cwd=str(cwd),
            dimensions=(30, 80),
            encoding="utf-8",
            codec_errors="replace",
        )
        self.raw = ""
        self.mark = 0

    @property
    def text(self) -> str:
        return ESCAPES.sub("", self.raw).replace("\r", "")

    def _read(self, timeout: float) -> None:
        try:
            chunk = self.child.read_nonblocking(65536, timeout=timeout)
        except pexpect.TIMEOUT:
            return
        if CPR_REQUEST in chunk:
            self.child.send("\x1b[1;1R")
        self.raw += chunk

    def expect(self, needle: str, timeout: float = TIMEOUT) -> None:
        """Wait until `needle` appears after the previous match."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.text.find(needle, self.mark)
            if found >= 0:
                self.mark = found + len(needle)
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{needle!r} not on screen after {timeout}s; screen "
                    f"since last match:\n{self.text[self.mark :][-3000:]}"
                )
            try:
                self._read(0.05)
            except pexpect.EOF:
                raise AssertionError(
                    f"program ended before {needle!r}:\n{self.text[-3000:]}"
                ) from None

    def settle(self) -> None:
        """Wait for the input line to be redrawn after the last output: from then on the
        terminal is back in raw mode, so control keys reach the program as keys."""
        self.expect("›")

    def send(self, line: str) -> None:
        self.child.send(line + "\r")

    def wait_exit(self, timeout: float = TIMEOUT) -> int:
        deadline = time.monotonic() + timeout
        while self.child.isalive() and time.monotonic() < deadline:
            try:
                self._read(0.1)
            except pexpect.EOF:
                break
        alive = self.child.isalive()
        self.child.close(force=True)
        assert not alive, f"the program did not exit:\n{self.text[-2000:]}"
        return int(self.child.exitstatus or 0)

    def assert_clean(self) -> None:
        for noise in ("Traceback", "Error:", "WARNING", "DEBUG", "Exception"):
            assert noise not in self.text, f"{noise!r} on screen:\n{self.text[-3000:]}"


@pytest.fixture
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(script=Script(), strict=True) as server:
        yield server


def answer_with(provider: ScriptedProvider, replies: dict[str, Reply]) -> None:
    provider.script = Script(fallback=Responder(replies))


@pytest.fixture
def chat(provider: ScriptedProvider, tmp_path: Path) -> Iterator[Any]:
    """Starts `talaria chat` against the provider; every terminal is closed at the end."""
    started: list[Terminal] = []

    def start(*extra: str, toolsets: str = "") -> Terminal:
        terminal = Terminal(
            [
                "chat",
                "-m",
                "scripted-model",
                "--base-url",
                provider.openai_base_url,
                "--api-key",
                "k",
                "--toolsets",
                toolsets,
                *extra,
            ],
            tmp_path / "home",
            tmp_path,
        )
        started.append(terminal)
        terminal.expect("/help for commands")
        return terminal

    yield start
    for terminal in started:
        terminal.child.close(force=True)


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


def test_ctrl_c_interrupts_a_slow_call_and_the_next_question_works(provider, chat):
    answer_with(
        provider, {"slow": Reply(text="too late", delay=30), "quick": Reply(text="quick answer")}
    )
    terminal = chat()
    terminal.send("be slow")
    terminal.expect("thinking")
    terminal.send("quick one")
    terminal.expect("queued: quick one")
    started = time.monotonic()
    terminal.child.send("\x03")
    terminal.expect("interrupted")
    assert time.monotonic() - started < 10
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
