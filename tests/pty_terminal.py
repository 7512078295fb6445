"""The real `talaria` program in a pseudo-terminal against a scripted provider that answers by
trigger word: the `Terminal` driver, the `provider` and `chat` fixtures, `answer_with`."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from talaria.testing.script import Reply, Script, Step
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
