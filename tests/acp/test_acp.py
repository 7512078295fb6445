"""`talaria acp` in a real subprocess, driven by the ACP SDK's own client against the scripted
provider: what an editor sees of a turn (streamed text, tool calls, diffs, plans), permissions,
cancel, session load, prompts with context, the editor's files and terminals, and the editor's
MCP servers (mcp-server-everything over stdio, streamable HTTP and HTTP+SSE; mcp-server-time),
connected for their session and stopped with it."""

from __future__ import annotations

import asyncio
import base64
import os
import uuid
from pathlib import Path

import acp
import pytest
import yaml
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    FileEditToolCallContent,
    HttpHeader,
    HttpMcpServer,
    McpServerStdio,
    SseMcpServer,
    TerminalToolCallContent,
)

from acp_editor import (
    Editor,
    capabilities,
    connected,
    editor_folders,
    model_options,
    processes_marked,
    talaria_cli,
    time_server,
)
from mcp_support import everything_http, everything_sse, npm_binary, sent_tool_names
from talaria.testing import Fail, Reply, ScriptedProvider, Stall, call, text
from talaria.tools.sandbox_probe import sandbox_support

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return editor_folders(tmp_path)[0]


@pytest.fixture
def work(home: Path) -> Path:
    return home.parent / "work"


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
    listed = talaria_cli(home, "sessions", "list", "--home", str(home))
    assert session.session_id in listed.stdout
    provider.add(text("resumed"))
    resume = ["chat", "--resume", session.session_id, "-q", "again", *model_options(provider)]
    resumed = talaria_cli(home, *resume)
    assert resumed.returncode == 0, resumed.stderr
    history = provider.requests[-1].body["messages"]
    asked = [m["content"].split("\n\n")[0] for m in history if m["role"] == "user"]
    assert asked == ["hi", "again"]  # (resumed from another folder: the newest says where)
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
    assert (start.kind, start.title, start.status) == (
        "read",
        "Read notes.txt (from line 2)",
        "in_progress",
    )
    assert [(loc.path, loc.line) for loc in start.locations] == [(str(work / "notes.txt"), 2)]
    (done,) = editor.progress(start.tool_call_id)
    assert done.status == "completed"
    assert "2|two" in done.content[0].content.text
    assert editor.updates.index(start) < editor.updates.index(done)
    assert editor.text() == "read it"


async def test_a_patch_is_a_diff_and_the_todo_list_is_a_plan(provider, home, work):
    (work / "main.py").write_text("def greet():\n    return 'hi'\n")
    provider.add(
        call("patch", {"path": "main.py", "old_string": "'hi'", "new_string": "'hello'"}),
        call(
            "todo",
            {
                "todos": [
                    {"id": "1", "content": "Fix the greeting", "status": "completed"},
                    {"id": "2", "content": "Add a test", "status": "in_progress"},
                    {"id": "3", "content": "Dropped idea", "status": "cancelled"},
                ]
            },
        ),
        text("done"),
    )
    editor = Editor()
    async with connected(editor, provider, home) as conn:
        session = await conn.new_session(cwd=str(work))
        await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("fix it")])
    patch_start, todo_start = editor.starts()
    assert (patch_start.kind, patch_start.title) == ("edit", "Edit main.py")
    (diff,) = editor.progress(patch_start.tool_call_id)[-1].content
    assert isinstance(diff, FileEditToolCallContent)
    assert diff.path == str(work / "main.py")
    assert diff.old_text == "def greet():\n    return 'hi'\n"
    assert diff.new_text == "def greet():\n    return 'hello'\n"
    assert (work / "main.py").read_text() == diff.new_text
    assert (todo_start.kind, todo_start.title) == ("think", "Update the plan")
    (plan,) = editor.of(AgentPlanUpdate)
    assert [(e.content, e.status) for e in plan.entries] == [
        ("Fix the greeting", "completed"),
        ("Add a test", "in_progress"),
    ]


async def test_permissions_allow_reject_and_always(provider, home, work):
    command = "rm -rf junk && touch ran.txt"
    provider.add(call("terminal", {"command": command}), text("tried"))
    editor = Editor(answer="reject-once")
    async with connected(editor, provider, home) as conn:
        sid = (await conn.new_session(cwd=str(work))).session_id
        await conn.prompt(session_id=sid, prompt=[acp.text_block("clean up")])
        assert not (work / "ran.txt").exists()
        ((asked, options),) = editor.permissions
        assert asked.kind == "execute" and command in asked.title
        assert [o.kind for o in options] == [
            "allow_once",
            "allow_always",
            "reject_once",
            "reject_always",
        ]
        assert editor.progress(asked.tool_call_id)[-1].status == "failed"
        assert "Denied by the user" in tool_results(provider)[-1]

        editor.answer = "allow-once"
        provider.add(call("terminal", {"command": command}), text("done"))
        await conn.prompt(session_id=sid, prompt=[acp.text_block("again")])
        assert (work / "ran.txt").exists()
        assert len(editor.permissions) == 2

        editor.answer, editor.permissions = "allow-always", []
        (work / "ran.txt").unlink()
        provider.add(call("terminal", {"command": command}), call("terminal", {"command": command}))
        provider.add(text("twice"))
        await conn.prompt(session_id=sid, prompt=[acp.text_block("twice")])
    assert len(editor.permissions) == 1, "an always grant is not asked again"
    assert command in yaml.safe_load((home / "config.yaml").read_text())["command_allowlist"]

    editor.answer = None  # the editor cancels the request: that is a deny
    provider.add(call("terminal", {"command": "rm -rf other && touch cancelled.txt"}), text("ok"))
    async with connected(editor, provider, home) as conn:
        sid = (await conn.new_session(cwd=str(work))).session_id
        await conn.prompt(session_id=sid, prompt=[acp.text_block("once more")])
    assert not (work / "cancelled.txt").exists()


async def test_cancel_during_a_slow_model_call_and_during_a_tool(provider, home, work):
    provider.add(Stall(Reply(text="Let me think about this for a long while"), 3, seconds=60))
    editor = Editor()
    async with connected(editor, provider, home) as conn:
        sid = (await conn.new_session(cwd=str(work))).session_id
        turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("slow")]))
        await editor.wait_for(editor.text)
        await conn.cancel(session_id=sid)
        answer = await asyncio.wait_for(turn, 20)
        assert answer.stop_reason == "cancelled"

        provider.add(call("terminal", {"command": "sleep 60 && touch slept.txt"}))
        turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("sleep")]))
        (start,) = await editor.wait_for(editor.starts)
        await conn.cancel(session_id=sid)
        answer = await asyncio.wait_for(turn, 20)
        assert answer.stop_reason == "cancelled"
        assert editor.progress(start.tool_call_id)[-1].status == "failed"

        provider.add(text("still here"))
        answer = await conn.prompt(session_id=sid, prompt=[acp.text_block("ok?")])
        assert answer.stop_reason == "end_turn"
    assert "nterrupted" in tool_results(provider)[-1]  # by the tool, or after its grace
    assert not (work / "slept.txt").exists()
    assert provider.invalid_requests == []


async def test_load_replays_an_earlier_session_and_continues_it(provider, home, work):
    (work / "notes.txt").write_text("remember this\n")
    provider.add(call("read_file", {"path": "notes.txt"}), text("I read your notes."))
    first = Editor()
    async with connected(first, provider, home) as conn:
        sid = (await conn.new_session(cwd=str(work))).session_id
        await conn.prompt(session_id=sid, prompt=[acp.text_block("read my notes")])

    editor = Editor()
    provider.add(text("continued"))
    async with connected(editor, provider, home) as conn:
        loaded = await conn.load_session(cwd=str(work), session_id=sid)
        assert loaded.modes.current_mode_id == "ask"
        replay = list(editor.updates)
        await conn.prompt(session_id=sid, prompt=[acp.text_block("and now?")])
        with pytest.raises(acp.RequestError, match="no session"):
            await conn.load_session(cwd=str(work), session_id="20200101_000000_nosuch")
    kinds = [type(u).__name__ for u in replay]
    assert kinds == [
        "UserMessageChunk",
        "ToolCallStart",
        "ToolCallProgress",
        "AgentMessageChunk",
    ]
    assert replay[0].content.text == "read my notes"
    assert (replay[1].kind, replay[1].title) == ("read", "Read notes.txt")
    assert "remember this" in replay[2].content[0].content.text
    assert replay[3].content.text == "I read your notes."
    users = [m["content"] for m in provider.requests[-1].body["messages"] if m["role"] == "user"]
    assert users == ["read my notes", "and now?"]


async def test_prompts_with_resources_embedded_context_and_images(provider, home, work):
    provider.add(text("seen"), text("a red dot"))
    editor = Editor()
    async with connected(editor, provider, home) as conn:
        sid = (await conn.new_session(cwd=str(work))).session_id
        unsaved = acp.embedded_text_resource(f"file://{work}/app.py", "print('unsaved')")
        link = acp.resource_link_block("lib.py", f"file://{work}/lib.py")
        blocks = [
            acp.text_block("Compare "),
            acp.resource_block(unsaved),
            acp.text_block(" with "),
            link,
        ]
        await conn.prompt(session_id=sid, prompt=blocks)
        content = last_user_message(provider)["content"]
        assert content.startswith(f"Compare @{work}/app.py with @{work}/lib.py")
        assert f"<context path=\"{work}/app.py\">\nprint('unsaved')\n</context>" in content

        pixel = base64.b64encode(b"\x89PNG\r\n\x1a\n not really a picture").decode()
        await conn.prompt(
            session_id=sid,
            prompt=[acp.text_block("What is this?"), acp.image_block(pixel, "image/png")],
        )
    parts = last_user_message(provider)["content"]
    assert parts == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{pixel}"}},
    ]
    assert provider.invalid_requests == []


async def test_the_editor_reads_writes_and_runs_when_it_offers_to(provider, home, work):
    main = work / "main.py"
    main.write_text("print('on disk')\n")
    provider.add(
        call("read_file", {"path": "main.py"}),
        call("patch", {"path": "main.py", "old_string": "unsaved", "new_string": "edited"}),
        call("terminal", {"command": "echo from-the-editor-terminal"}),
        text("done"),
    )
    editor = Editor(buffers={str(main): "print('unsaved')\n"})
    caps = capabilities(fs=True, terminal=True)
    async with connected(editor, provider, home, caps=caps) as conn:
        sid = (await conn.new_session(cwd=str(work))).session_id
        await conn.prompt(session_id=sid, prompt=[acp.text_block("edit")])
    read, patched, run = tool_results(provider)
    assert "1|print('unsaved')" in read
    assert editor.buffers[str(main)] == "print('edited')\n"
    assert patched.startswith("Patched")
    assert main.read_text() == "print('on disk')\n", "the write went to the editor's buffer"
    _, patch_start, run_start = editor.starts()
    (diff,) = editor.progress(patch_start.tool_call_id)[-1].content
    assert (diff.old_text, diff.new_text) == ("print('unsaved')\n", "print('edited')\n")
    assert "from-the-editor-terminal" in run and "exit code: 0" in run
    shown = [c for u in editor.progress(run_start.tool_call_id) for c in u.content or []]
    assert any(isinstance(c, TerminalToolCallContent) for c in shown)
    assert ("read", str(main)) in editor.fs_calls


async def test_modes_ask_accept_edits_and_yolo_keep_the_floor(provider, home, work):
    editor = Editor(answer="reject-once")
    async with connected(editor, provider, home) as conn:
        created = await conn.new_session(cwd=str(work))
        sid = created.session_id
        assert created.modes.current_mode_id == "ask"
        assert [m.id for m in created.modes.available_modes] == ["ask", "accept-edits", "yolo"]

        provider.add(call("write_file", {"path": "~/.bashrc", "content": "alias x=y\n"}), text("."))
        await conn.prompt(session_id=sid, prompt=[acp.text_block("write")])
        assert len(editor.permissions) == 1 and not (home / ".bashrc").exists()

        await conn.set_session_mode(session_id=sid, mode_id="accept-edits")
        provider.add(call("write_file", {"path": "~/.bashrc", "content": "alias x=y\n"}), text("."))
        provider.add(call("terminal", {"command": "rm -rf junk && touch ran.txt"}), text("."))
        await conn.prompt(session_id=sid, prompt=[acp.text_block("write")])
        await conn.prompt(session_id=sid, prompt=[acp.text_block("run")])
        assert (home / ".bashrc").read_text() == "alias x=y\n"
        assert len(editor.permissions) == 2 and not (work / "ran.txt").exists()

        await conn.set_session_mode(session_id=sid, mode_id="yolo")
        provider.add(call("terminal", {"command": "rm -rf junk && touch ran.txt"}), text("."))
        provider.add(call("terminal", {"command": "mkfs.ext4 /dev/talaria-no-such-disk"}))
        provider.add(text("."))
        await conn.prompt(session_id=sid, prompt=[acp.text_block("run")])
        await conn.prompt(session_id=sid, prompt=[acp.text_block("format")])
        assert (work / "ran.txt").exists() and len(editor.permissions) == 2
        assert tool_results(provider)[-1].startswith("BLOCKED")
        with pytest.raises(acp.RequestError, match="unknown mode"):
            await conn.set_session_mode(session_id=sid, mode_id="reckless")


async def test_refusals_and_failures_reach_the_editor(provider, home, work):
    provider.add(Reply(refusal="I can't help with that."))
    editor = Editor()
    async with connected(editor, provider, home, "--max-turns", "1") as conn:
        sid = (await conn.new_session(cwd=str(work))).session_id
        answer = await conn.prompt(session_id=sid, prompt=[acp.text_block("bad idea")])
        assert answer.stop_reason == "refusal"

        provider.add(call("read_file", {"path": "x"}), text("summary"))
        answer = await conn.prompt(session_id=sid, prompt=[acp.text_block("loop")])
        assert answer.stop_reason == "max_turn_requests"

        provider.add(Fail(400, "this request is malformed"))
        with pytest.raises(acp.RequestError, match="malformed"):
            await conn.prompt(session_id=sid, prompt=[acp.text_block("fail")])
        with pytest.raises(acp.RequestError, match="unknown session"):
            await conn.prompt(session_id="nope", prompt=[acp.text_block("hi")])


@pytest.mark.bwrap
async def test_the_sandbox_is_a_session_option_from_the_next_turn(provider, home, work):
    if not sandbox_support().available:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs bubblewrap: {sandbox_support().detail}")
        pytest.skip(sandbox_support().detail)
    editor = Editor()
    async with connected(editor, provider, home) as conn:
        created = await conn.new_session(cwd=str(work))
        sid = created.session_id
        (option,) = created.config_options
        assert (option.id, option.current_value) == ("sandbox", "workspace-write")
        assert [o.value for o in option.options] == ["read-only", "workspace-write", "full-access"]
        changed = await conn.set_config_option(
            config_id="sandbox", session_id=sid, value="read-only"
        )
        assert changed.config_options[0].current_value == "read-only"
        await conn.set_session_mode(session_id=sid, mode_id="yolo")

        provider.add(call("terminal", {"command": "rm -rf junk && touch blocked.txt"}), text("."))
        await conn.prompt(session_id=sid, prompt=[acp.text_block("try")])
        assert not (work / "blocked.txt").exists()
        assert "read-only sandbox" in tool_results(provider)[-1]

        await conn.set_config_option(config_id="sandbox", session_id=sid, value="workspace-write")
        provider.add(call("terminal", {"command": "rm -rf junk && touch allowed.txt"}), text("."))
        await conn.prompt(session_id=sid, prompt=[acp.text_block("again")])
        assert (work / "allowed.txt").exists()
        assert editor.permissions == [], "the yolo mode held across the switch"
        with pytest.raises(acp.RequestError, match="unknown sandbox mode"):
            await conn.set_config_option(config_id="sandbox", session_id=sid, value="open")
    users = [m["content"] for m in provider.requests[-1].body["messages"] if m["role"] == "user"]
    assert users == ["try", "again"], "one session across the switch"


# ---- the editor's MCP servers ------------------------------------------------------------


@pytest.mark.npm
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
