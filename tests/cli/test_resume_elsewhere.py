"""Sessions and directories: `-c` resumes the newest session started in the current directory
(the newest of all when none was), and a session resumed in another directory tells the
model where it works now, while its stored system prompt stays byte for byte the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from acp_editor import agent_env
from talaria.testing import ScriptedProvider, call, text


def _chat(home: Path, cwd: Path, provider: ScriptedProvider, *argv: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "talaria.cli.main", "chat", "--json", "--home", str(home),
         "--base-url", provider.openai_base_url, "--model", "scripted-model", "--api-key", "k",
         "--toolsets", "terminal", *argv],
        capture_output=True, text=True, env=agent_env(home), timeout=90, cwd=cwd,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict = json.loads(done.stdout)
    return result


def _folders(tmp_path: Path) -> tuple[Path, Path, Path]:
    home, first, second = tmp_path / "home", tmp_path / "first", tmp_path / "second"
    for folder in (home, first, second):
        folder.mkdir()
    (home / "config.yaml").write_text("context:\n  engine: none\nmemory:\n  enabled: false\n")
    return home, first.resolve(), second.resolve()


def test_continue_prefers_the_newest_session_of_this_directory(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    home, first, second = _folders(tmp_path)
    provider.add(*[text(f"answer {n}") for n in range(5)])
    started_first = _chat(home, first, provider, "-q", "in first")["session_id"]
    started_second = _chat(home, second, provider, "-q", "in second")["session_id"]
    assert _chat(home, first, provider, "-q", "again", "-c")["session_id"] == started_first
    assert _chat(home, second, provider, "-q", "again", "-c")["session_id"] == started_second
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    newest = _chat(home, elsewhere, provider, "-q", "no session here", "-c")["session_id"]
    assert newest == started_second  # none started here: the newest of all


def test_a_session_resumed_elsewhere_is_told_its_new_directory(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    home, first, second = _folders(tmp_path)
    provider.add(text("started"), call("terminal", {"command": "pwd"}), text("done"))
    session_id = _chat(home, first, provider, "-q", "start")["session_id"]
    system_prompt = provider.requests[0].body["messages"][0]["content"]
    result = _chat(home, second, provider, "-q", "where are you?", "--resume", session_id)
    for request in provider.requests[1:]:
        messages = request.body["messages"]
        assert messages[0]["content"] == system_prompt  # byte-stable
        assert f"The working directory is now {second}" in json.dumps(messages[-1])
        assert "working directory is now" not in json.dumps(messages[:-1])
    tool_result = next(m for m in result["messages"] if m["role"] == "tool")
    assert str(second) in tool_result["content"]
