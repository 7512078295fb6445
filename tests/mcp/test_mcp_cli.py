"""`talaria mcp list|add|remove|serve`, the last driven by the official `mcp` client."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import Client, StdioServerParameters

from helpers import scripted_agent
from mcp_support import REPO, TEST_SERVER, sdk_server
from talaria.cli.main import main
from talaria.testing import ScriptedProvider, calls, text


def test_add_list_remove_edit_the_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = str(tmp_path)
    add = ["mcp", "add", "--home", home, "--approval", "allow", "test", "--", sys.executable]
    assert main([*add, TEST_SERVER]) == 0
    web = ["mcp", "add", "--home", home, "--url", "http://127.0.0.1:9/mcp", "web"]
    assert main([*web, "--header", "Authorization=Bearer tok"]) == 2, "options after NAME"
    assert main([*web[:-1], "--header", "Authorization=Bearer tok", "web"]) == 0
    servers = yaml.safe_load((tmp_path / "config.yaml").read_text())["mcp_servers"]
    assert servers == {
        "test": {"command": sys.executable, "args": [TEST_SERVER], "approval": "allow"},
        "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer tok"}},
    }
    capsys.readouterr()
    assert main(["mcp", "list", "--home", home]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0] == f"test (stdio, {sys.executable} {TEST_SERVER}) - ready"
    assert listing[1:5] == [
        "  mcp__test__pid",
        "  mcp__test__shout",
        "  mcp__test__fail",
        "  mcp__test__grow",
    ]
    assert listing[5].startswith("web (http, http://127.0.0.1:9/mcp) - failed: could not start")
    assert "tok" not in "\n".join(listing)
    assert main(["mcp", "remove", "--home", home, "web"]) == 0
    assert main(["mcp", "remove", "--home", home, "web"]) == 2
    assert "no MCP server named 'web'" in capsys.readouterr().err
    servers = yaml.safe_load((tmp_path / "config.yaml").read_text())["mcp_servers"]
    assert list(servers) == ["test"]


def test_a_bad_entry_is_refused_and_the_file_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mcp", "add", "--home", str(tmp_path), "--approval", "allow", "nothing"]) == 2
    assert "needs exactly one of 'command' (stdio) or 'url'" in capsys.readouterr().err
    assert not (tmp_path / "config.yaml").exists()


async def test_the_official_client_drives_talaria_mcp_serve(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the secret word is papaya\n")
    script = [
        calls(("read_file", {"path": "notes.txt"})),
        text("The word is papaya."),
        text("Still papaya."),
    ]
    with ScriptedProvider(script) as provider:
        params = StdioServerParameters(
            command=sys.executable,
            args=[
                "-m",
                "talaria.cli.main",
                "mcp",
                "serve",
                "--home",
                str(tmp_path),
                "--model",
                "scripted-model",
                "--base-url",
                provider.openai_base_url,
                "--api-key",
                "test-key",
                "--toolsets",
                "file",
            ],
            env={"PYTHONPATH": str(REPO / "src"), "PATH": os.environ["PATH"]},
            cwd=str(tmp_path),
        )
        async with Client(params) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            first = await client.call_tool("run_task", {"prompt": "What is the secret word?"})
            task = json.loads(first.content[0].text)
            again = await client.call_tool(
                "continue_session", {"session_id": task["session_id"], "prompt": "Sure?"}
            )
            follow_up = json.loads(again.content[0].text)
            listed = await client.call_tool("list_sessions", {"limit": 5})
            missing = await client.call_tool(
                "continue_session", {"session_id": "no-such-session", "prompt": "hi"}
            )
        assert provider.invalid_requests == []
        tool_message = provider.requests[1].body["messages"][-1]
    assert names == ["run_task", "continue_session", "list_sessions"]
    assert task["final_response"] == "The word is papaya." and task["completed"] is True
    assert "papaya" in tool_message["content"]
    assert follow_up["session_id"] == task["session_id"]
    assert follow_up["final_response"] == "Still papaya."
    sessions = listed.structured_content["result"]
    assert [s["session_id"] for s in sessions] == [task["session_id"]]
    assert sessions[0]["source"] == "mcp" and sessions[0]["messages"] == 6
    assert missing.is_error and "no-such-session" in missing.content[0].text


class _ChatHost:
    """Just what /prompt needs of the chat: the agent, a screen, and the next message."""

    def __init__(self, agent: Any, tmp_path: Path) -> None:
        from talaria.cli.render import Renderer

        self.agent = agent
        self.out = io.StringIO()
        self.renderer = Renderer(self.out, color=False, cwd=tmp_path)
        self.submitted: list[str] = []

    def submit(self, text: str) -> None:
        self.submitted.append(text)


def test_server_prompts_are_slash_commands_in_the_chat(tmp_path: Path) -> None:
    from talaria.cli.slash import build_registry

    prompt = build_registry().get("prompt")
    assert prompt is not None
    with (
        ScriptedProvider([]) as provider,
        scripted_agent(provider, tmp_path, mcp_servers={"test": sdk_server()}) as agent,
    ):
        host = _ChatHost(agent, tmp_path)
        prompt.handler(host, "")  # type: ignore[arg-type]
        prompt.handler(host, "test:review 'topic=the parser'")  # type: ignore[arg-type]
        prompt.handler(host, "test:nope")  # type: ignore[arg-type]
    screen = host.out.getvalue()
    assert "/prompt test:review topic=… - Ask for a review of a topic." in screen
    assert host.submitted == ["Please review the parser carefully."]
    assert "test:nope" in screen.splitlines()[-1]
