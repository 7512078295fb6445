"""MCP server tools reach the model and their results come back, with real servers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers import MODES, scripted_agent, tool_results
from mcp_support import everything, everything_http, npm_binary, sdk_server, sent_tool_names
from talaria.testing import ScriptedProvider, calls, text


@pytest.mark.npm
@pytest.mark.parametrize("mode", MODES)
def test_a_stdio_server_tool_result_reaches_the_model(tmp_path: Path, mode: str) -> None:
    script = [calls(("mcp__everything__echo", {"message": "hello"})), text("done")]
    with ScriptedProvider(script) as server:
        agent = scripted_agent(server, tmp_path, mode, mcp_servers={"everything": everything()})
        with agent:
            result = agent.run_conversation("echo hello")
        assert server.invalid_requests == []
        first, second = server.requests[0].body, server.requests[1].body
    assert "mcp__everything__get-sum" in sent_tool_names(first)
    assert tool_results(result) == ["Echo: hello"]
    assert "Echo: hello" in json.dumps(second)
    assert result["final_response"] == "done"


@pytest.mark.npm
def test_a_streamable_http_server_with_headers_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_MCP_TOKEN", "s3cret-token")
    script = [calls(("mcp__web__get-sum", {"a": 2, "b": 40})), text("42")]
    with everything_http() as url, ScriptedProvider(script) as server:
        servers = {
            "web": {
                "url": url,
                "headers": {"Authorization": "Bearer ${TEST_MCP_TOKEN}"},
                "approval": "allow",
            }
        }
        with scripted_agent(server, tmp_path, mcp_servers=servers) as agent:
            result = agent.run_conversation("2 + 40?")
        bodies = json.dumps([request.body for request in server.requests])
    assert tool_results(result) == ["The sum of 2 and 40 is 42."]
    assert "s3cret-token" not in bodies


@pytest.mark.npm
def test_error_results_structured_content_and_images(tmp_path: Path) -> None:
    script = [
        calls(
            ("mcp__test__fail", {"reason": "nope"}),
            ("mcp__everything__get-structured-content", {"location": "Chicago"}),
            ("mcp__everything__get-tiny-image", {}),
        ),
        text("done"),
    ]
    servers = {"test": sdk_server(), "everything": everything()}
    with (
        ScriptedProvider(script) as server,
        scripted_agent(server, tmp_path, mcp_servers=servers) as agent,
    ):
        failed, structured, image = tool_results(agent.run_conversation("go"))
    assert failed.startswith("Error:") and "failed on purpose: nope" in failed
    assert json.loads(structured)["temperature"] is not None
    saved = [p for p in (tmp_path / "mcp" / "media").iterdir() if p.suffix == ".png"]
    assert len(saved) == 1 and str(saved[0]) in image
    assert saved[0].read_bytes().startswith(b"\x89PNG")


@pytest.mark.npm
def test_the_filesystem_server_reads_a_file(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "notes.txt").write_text("the answer is 42\n")
    files = {"command": npm_binary("mcp-server-filesystem"), "args": [str(shared)]}
    script = [
        calls(("mcp__files__read_text_file", {"path": str(shared / "notes.txt")})),
        text("ok"),
    ]
    with (
        ScriptedProvider(script) as server,
        scripted_agent(
            server, tmp_path, mcp_servers={"files": {**files, "approval": "allow"}}
        ) as agent,
    ):
        result = agent.run_conversation("read the notes")
    assert server.invalid_requests == []
    assert "the answer is 42" in tool_results(result)[0]


def test_include_and_exclude_choose_the_offered_tools(tmp_path: Path) -> None:
    servers = {
        "a": sdk_server(tools={"include": ["shout", "pid"]}),
        "b": sdk_server(tools={"exclude": ["grow", "fail", "pid"]}),
    }
    with (
        ScriptedProvider([text("hi")]) as server,
        scripted_agent(server, tmp_path, mcp_servers=servers) as agent,
    ):
        agent.chat("hi")
        names = sent_tool_names(server.requests[0].body)
    assert [n for n in names if n.startswith("mcp__")] == [
        "mcp__a__pid",
        "mcp__a__shout",
        "mcp__b__shout",
    ]


def test_resources_can_be_listed_and_read(tmp_path: Path) -> None:
    script = [
        calls(("mcp_resources", {"action": "list"})),
        calls(("mcp_resources", {"action": "read", "server": "test", "uri": "test://greeting"})),
        text("done"),
    ]
    with (
        ScriptedProvider(script) as server,
        scripted_agent(server, tmp_path, mcp_servers={"test": sdk_server()}) as agent,
    ):
        listing, content = tool_results(agent.run_conversation("what resources?"))
    assert "test\ttest://greeting\tgreeting" in listing
    assert "hello from a resource" in content


def test_the_python_time_server(tmp_path: Path) -> None:
    command = str(Path(sys.executable).with_name("mcp-server-time"))
    servers = {
        "time": {"command": command, "args": ["--local-timezone", "UTC"], "approval": "allow"}
    }
    script = [calls(("mcp__time__get_current_time", {"timezone": "Europe/Paris"})), text("ok")]
    with (
        ScriptedProvider(script) as server,
        scripted_agent(server, tmp_path, mcp_servers=servers) as agent,
    ):
        (answer,) = tool_results(agent.run_conversation("time in Paris?"))
    assert json.loads(answer)["timezone"] == "Europe/Paris"
