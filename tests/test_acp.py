"""`talaria acp` in a real subprocess, driven by the ACP SDK's own client against the scripted
provider: what an editor sees of a turn (streamed text, tool calls, diffs, plans), permissions,
cancel, session load, prompts with context, and the editor's files and terminals."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import acp
import pytest
import yaml
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    FileEditToolCallContent,
    TerminalToolCallContent,
    UserMessageChunk,
)

from talaria.testing import Reply, ScriptedProvider, Stall, call, text
from tests.acp_editor import Editor, agent_env, capabilities, connected

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump({"context": {"engine": "none"}}))
    return folder


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def last_user_message(server: ScriptedProvider) -> dict:
    messages = server.requests[-1].body["messages"]
    return next(m for m in reversed(messages) if m["role"] == "user")


def tool_results(server: ScriptedProvider) -> list[str]:
    return [m["content"] for m in server.requests[-1].body["messages"] if m["role"] == "tool"]


async def test_text_streams_as_chunks_and_the_session_is_a_talaria_session(provider, home, work):
    provider.add(Reply(text="Hello from the talaria agent", reasoning="Greet them.", chunk_size=5))
    editor = Editor()
    async with connected(editor, provider, home) as conn:
        session = await conn.new_session(cwd=str(work))
        answer = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("hi")])
    assert answer.stop_reason == "end_turn"
    chunks = editor.of(AgentMessageChunk)
    assert len(chunks) > 1
    assert editor.text() == "Hello from the talaria agent"
    assert "".join(u.content.text for u in editor.of(AgentThoughtChunk)) == "Greet them."
    listed = subprocess.run(
        [sys.executable, "-m", "talaria.cli.main", "sessions", "list", "--home", str(home)],
        capture_output=True,
        text=True,
        env=agent_env(home),
        check=True,
    )
    assert session.session_id in listed.stdout
    provider.add(text("resumed"))
    resumed = subprocess.run(
        [
            sys.executable,
            "-m",
            "talaria.cli.main",
            "chat",
            "--resume",
            session.session_id,
            "-q",
            "again",
            "--base-url",
            provider.openai_base_url,
            "--model",
            "scripted-model",
            "--api-key",
            "test-key",
        ],
        capture_output=True,
        text=True,
        env=agent_env(home),
        timeout=60,
    )
    assert resumed.returncode == 0, resumed.stderr
    history = provider.requests[-1].body["messages"]
    assert [m["content"] for m in history if m["role"] == "user"] == ["hi", "again"]
    assert provider.invalid_requests == []


async def test_a_tool_call_shows_its_kind_title_location_and_result(provider, home, work):
    (work / "notes.txt").write_text("one\ntwo\nthree\n")
    provider.add(call("read_file", {"path": "notes.txt", "offset": 2}), text("read it"))
    editor = Editor()
    async with connected(editor, provider, home) as conn:
        session = await conn.new_session(cwd=str(work))
        answer = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("go")])
    assert answer.stop_reason == "end_turn"
    (start,) = editor.starts()
    assert (start.kind, start.title, start.status) == ("read", "Read notes.txt (from line 2)", "in_progress")
    assert [(loc.path, loc.line) for loc in start.locations] == [(str(work / "notes.txt"), 2)]
    (done,) = editor.progress(start.tool_call_id)
    assert done.status == "completed"
    assert "2|two" in done.content[0].content.text
    assert editor.updates.index(start) < editor.updates.index(done)
    assert editor.text() == "read it"
