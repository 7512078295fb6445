"""Steer and queue through ACP: `talaria acp` in a real subprocess, driven by the SDK's client
against the scripted provider. A prompt sent while one runs waits its turn and gets its own
answer; `_talaria/steer` (advertised in the capabilities' `_meta`) reaches the running turn's
next model call, after the tool results; a cancel answers the running and the waiting prompts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import acp
import pytest
from acp.schema import UserMessageChunk

from acp_editor import Editor, connected, editor_folders
from talaria.testing import ScriptedProvider, call, text

pytestmark = pytest.mark.timeout(120)

STEER = "Also mention the docs folder."
WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.05; done; echo released"
"""A command that runs until the test creates `go` in the session's folder."""


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    return editor_folders(tmp_path)


def user_texts(server: ScriptedProvider, index: int) -> list[str]:
    messages = server.requests[index].body["messages"]
    return [m["content"] for m in messages if m["role"] == "user"]


async def round_trip(conn: acp.ClientSideConnection) -> None:
    """An answered request: the agent has read everything sent before it."""
    with pytest.raises(acp.RequestError, match="Method not found"):
        await conn.ext_method("talaria/nothing", {})


async def test_a_prompt_sent_during_a_turn_waits_and_a_steer_reaches_the_next_call(
    provider: ScriptedProvider, folders: tuple[Path, Path]
) -> None:
    home, work = folders
    provider.add(call("terminal", {"command": WAIT_FOR_GO}), text("First done."), text("Second."))
    editor = Editor()
    async with connected(editor, provider, home) as conn:
        hello = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        assert hello.agent_capabilities.field_meta["talaria"]["steer"] is True
        sid = (await conn.new_session(cwd=str(work))).session_id

        first = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("one")]))
        await editor.wait_for(editor.starts)
        second = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("two")]))
        steered = await conn.ext_method("talaria/steer", {"sessionId": sid, "text": STEER})
        assert steered["steerId"] and steered["turnId"]
        (work / "go").touch()

        assert (await asyncio.wait_for(first, 30)).stop_reason == "end_turn"
        assert (await asyncio.wait_for(second, 30)).stop_reason == "end_turn"

        shown = [u.content.text for u in editor.of(UserMessageChunk)]
        assert shown == [STEER], "the editor shows the steer where the model reads it"
        with pytest.raises(acp.RequestError, match="no turn is running"):
            await conn.ext_method("talaria/steer", {"sessionId": sid, "text": "late"})
        with pytest.raises(acp.RequestError, match="must be a non-empty string"):
            await conn.ext_method("talaria/steer", {"sessionId": sid, "text": ""})

    assert len(provider.requests) == 3
    after_tool = json.dumps(provider.requests[1].body)
    assert STEER not in json.dumps(provider.requests[0].body)
    assert after_tool.index("released") < after_tool.index(STEER), "after the tool's result"
    assert user_texts(provider, 1) == ["one", STEER]
    assert user_texts(provider, 2) == ["one", STEER, "two"], "the waiting prompt ran next"
    assert provider.invalid_requests == []


async def test_a_steer_naming_an_ended_turn_is_refused(
    provider: ScriptedProvider, folders: tuple[Path, Path]
) -> None:
    home, work = folders
    provider.add(call("terminal", {"command": WAIT_FOR_GO}), text("done"))
    editor = Editor()
    async with connected(editor, provider, home) as conn:
        sid = (await conn.new_session(cwd=str(work))).session_id
        turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("one")]))
        await editor.wait_for(editor.starts)
        with pytest.raises(acp.RequestError, match="is not running"):
            await conn.ext_method(
                "talaria/steer", {"sessionId": sid, "text": STEER, "turnId": "task_gone"}
            )
        (work / "go").touch()
        assert (await asyncio.wait_for(turn, 30)).stop_reason == "end_turn"
    assert STEER not in json.dumps(provider.requests[-1].body)


async def test_cancel_answers_the_running_and_the_waiting_prompts(
    provider: ScriptedProvider, folders: tuple[Path, Path]
) -> None:
    home, work = folders
    provider.add(call("terminal", {"command": WAIT_FOR_GO}))
    editor = Editor()
    async with connected(editor, provider, home) as conn:
        sid = (await conn.new_session(cwd=str(work))).session_id
        first = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("one")]))
        await editor.wait_for(editor.starts)
        second = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("two")]))
        await round_trip(conn)
        await conn.cancel(session_id=sid)

        assert (await asyncio.wait_for(first, 30)).stop_reason == "cancelled"
        assert (await asyncio.wait_for(second, 30)).stop_reason == "cancelled"

        provider.add(text("back"))
        after = await conn.prompt(session_id=sid, prompt=[acp.text_block("three")])
        assert after.stop_reason == "end_turn"
    assert "two" not in user_texts(provider, -1), "a cancelled waiting prompt never ran"
    assert user_texts(provider, -1)[-1] == "three"
