"""The editor's `mcpServers`: `talaria acp` in a real subprocess, driven by the ACP SDK's client,
connects real MCP servers (mcp-server-everything over stdio, streamable HTTP and HTTP+SSE;
mcp-server-time) for that session, offers their tools to the model and stops them with it."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import acp
import pytest
import yaml
from acp.schema import EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio, SseMcpServer

from acp_editor import Editor, connected
from mcp_support import everything_http, everything_sse, npm_binary, sent_tool_names
from talaria.testing import ScriptedProvider, call, text

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


def time_server(marker: str) -> McpServerStdio:
    """mcp-server-time with an environment variable that finds its process again."""
    command = str(Path(sys.executable).with_name("mcp-server-time"))
    env = [EnvVariable(name="TALARIA_TEST_MARK", value=marker)]
    return McpServerStdio(name="clock", command=command, args=["--local-timezone=UTC"], env=env)


def processes_marked(marker: str) -> list[int]:
    """Live processes whose environment holds TALARIA_TEST_MARK=marker."""
    wanted = f"TALARIA_TEST_MARK={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if wanted in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def tool_results(server: ScriptedProvider) -> list[str]:
    return [m["content"] for m in server.requests[-1].body["messages"] if m["role"] == "tool"]


async def test_stdio_http_and_sse_servers_from_the_editor_serve_the_session(provider, home, work):
    stdio = McpServerStdio(
        name="local", command=npm_binary("mcp-server-everything"), args=[], env=[]
    )
    provider.add(
        call("mcp__local__echo", {"message": "over stdio"}),
        call("mcp__web__get-sum", {"a": 2, "b": 40}),
        call("mcp__old__echo", {"message": "over sse"}),
        text("all three answered"),
    )
    editor = Editor()
    with everything_http() as http_url, everything_sse() as sse_url:
        web = HttpMcpServer(
            type="http",
            name="web",
            url=http_url,
            headers=[HttpHeader(name="X-Editor", value="zed")],
        )
        old = SseMcpServer(type="sse", name="old", url=sse_url, headers=[])
        async with connected(editor, provider, home) as conn:
            hello = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(work), mcp_servers=[stdio, web, old])
            answer = await conn.prompt(
                session_id=session.session_id, prompt=[acp.text_block("use the servers")]
            )
    capabilities = hello.agent_capabilities.mcp_capabilities
    assert (capabilities.http, capabilities.sse) == (True, True)
    assert answer.stop_reason == "end_turn", (home / "acp-stderr.log").read_text()
    offered = sent_tool_names(provider.requests[0].body)
    assert {"mcp__local__echo", "mcp__web__get-sum", "mcp__old__echo"} <= set(offered)
    assert tool_results(provider) == [
        "Echo: over stdio",
        "The sum of 2 and 40 is 42.",
        "Echo: over sse",
    ]
    asked = [tool_call.title or "" for tool_call, _ in editor.permissions]
    assert len(asked) == 3, asked  # the editor's servers ask like configured ones
    assert editor.text() == "all three answered"
    assert provider.invalid_requests == []


async def test_the_servers_stop_with_their_session_and_load_brings_its_own(provider, home, work):
    first, second = uuid.uuid4().hex, uuid.uuid4().hex
    provider.add(call("mcp__clock__get_current_time", {"timezone": "Europe/Paris"}), text("ok"))
    provider.add(text("no clock now"))
    provider.add(text("the other clock"))
    editor = Editor()
    async with connected(editor, provider, home) as conn:
        session = await conn.new_session(cwd=str(work), mcp_servers=[time_server(first)])
        sid = session.session_id
        await conn.prompt(session_id=sid, prompt=[acp.text_block("what time is it")])
        assert "Europe/Paris" in tool_results(provider)[0]
        assert len(processes_marked(first)) == 1  # the env from the editor reached it

        await conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[])
        await editor.wait_for(lambda: not processes_marked(first), timeout=15)
        await conn.prompt(session_id=sid, prompt=[acp.text_block("and now")])
        assert not any(
            n.startswith("mcp__clock__") for n in sent_tool_names(provider.requests[-1].body)
        )

        await conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[time_server(second)])
        await conn.prompt(session_id=sid, prompt=[acp.text_block("again")])
        assert "mcp__clock__get_current_time" in sent_tool_names(provider.requests[-1].body)
        assert len(processes_marked(second)) == 1
    await editor.wait_for(lambda: not processes_marked(second), timeout=15)


async def test_a_server_talaria_cannot_connect_is_one_clear_error(provider, home, work):
    editor = Editor()
    twice = [time_server("a"), time_server("b")]
    async with connected(editor, provider, home) as conn:
        with pytest.raises(acp.RequestError, match="two servers are named 'clock'"):
            await conn.new_session(cwd=str(work), mcp_servers=twice)
        blank = HttpMcpServer(type="http", name="web", url="", headers=[])
        with pytest.raises(acp.RequestError, match=r"mcpServers: .*web"):
            await conn.new_session(cwd=str(work), mcp_servers=[blank])
        provider.add(text("still here"))
        session = await conn.new_session(cwd=str(work), mcp_servers=[])
        answer = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("hello")])
    assert answer.stop_reason == "end_turn"
    assert editor.text() == "still here"
