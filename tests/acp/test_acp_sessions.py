"""The editor's session picker through a real `talaria acp` subprocess and the SDK's client:
`session/list` (newest first, cwd filter, titles, pages), `session/resume` (no replay, the
conversation goes on) and `session/close` (the running turn ends, its MCP server stops, later
prompts get an error), and what `initialize` advertises for them."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from pathlib import Path

import acp
import pytest

from acp_editor import Editor, connected, editor_folders, processes_marked, time_server
from talaria.store.sqlite import SQLiteSessionStore
from talaria.testing import Reply, Stall, call, text

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    return editor_folders(tmp_path)


def user_texts(provider) -> list[str]:
    return [m["content"] for m in provider.requests[-1].body["messages"] if m["role"] == "user"]


async def every_page(conn, **filters) -> tuple[list, int]:
    """All sessions the agent lists, following the cursors; and how many pages it took."""
    listed, cursor, pages = [], None, 0
    while True:
        page = await conn.list_sessions(cursor=cursor, **filters)
        listed.extend(page.sessions)
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            return listed, pages


async def test_initialize_advertises_list_resume_and_close(provider, folders):
    home, _ = folders
    async with connected(Editor(), provider, home) as conn:
        hello = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
    wire = hello.agent_capabilities.model_dump(by_alias=True, exclude_none=True)
    assert wire["sessionCapabilities"] == {"list": {}, "resume": {}, "close": {}}
    assert wire["loadSession"] is True


async def test_list_shows_newest_first_with_titles_and_filters_by_cwd(provider, folders):
    home, work = folders
    other = work.parent / "other"
    other.mkdir()
    provider.add(text("first answer"), text("second answer"))
    async with connected(Editor(), provider, home) as conn:
        first = (await conn.new_session(cwd=str(work))).session_id
        await conn.prompt(session_id=first, prompt=[acp.text_block("fix the   parser\nplease")])
        second = (await conn.new_session(cwd=str(other))).session_id
        await conn.prompt(session_id=second, prompt=[acp.text_block("write the docs")])
        fresh = (await conn.new_session(cwd=str(work))).session_id  # no prompt yet

        everything = await conn.list_sessions()
        in_work = await conn.list_sessions(cwd=str(work))
        in_other = await conn.list_sessions(cwd=str(other))
        with pytest.raises(acp.RequestError, match="absolute"):
            await conn.list_sessions(cwd="relative/dir")
        with pytest.raises(acp.RequestError, match="not a cursor"):
            await conn.list_sessions(cursor="bogus")
    assert [s.session_id for s in everything.sessions] == [fresh, second, first]
    assert everything.next_cursor is None
    by_id = {s.session_id: s for s in everything.sessions}
    assert by_id[first].title == "fix the parser please"
    assert by_id[second].title == "write the docs"
    assert (by_id[first].cwd, by_id[second].cwd, by_id[fresh].cwd) == (
        str(work),
        str(other),
        str(work),
    )
    stamps = [datetime.fromisoformat(s.updated_at) for s in everything.sessions]
    assert all(stamp.tzinfo is not None for stamp in stamps)
    assert stamps == sorted(stamps, reverse=True)
    assert [s.session_id for s in in_work.sessions] == [fresh, first]
    assert [s.session_id for s in in_other.sessions] == [second]


async def test_list_pages_through_every_session_once(provider, folders):
    home, work = folders
    store = SQLiteSessionStore(home / "state.db")
    made = []
    for n in range(57):
        sid = f"20260101_0000{n:02d}_{uuid.uuid4().hex[:6]}"
        store.create_session(sid, source="cli", cwd=str(work), title=f"task {n}")
        made.append(sid)
    store.create_session("20260101_elsewhere", source="cli", cwd="/elsewhere")
    store.close()
    async with connected(Editor(), provider, home) as conn:
        listed, pages = await every_page(conn, cwd=str(work))
        everything, _ = await every_page(conn)
    assert pages == 2
    assert [s.session_id for s in listed] == list(reversed(made))
    assert [s.title for s in listed[:2]] == ["task 56", "task 55"]
    assert len(everything) == 58


async def test_resume_continues_without_replaying(provider, folders):
    home, work = folders
    provider.add(call("read_file", {"path": "notes.txt"}), text("I read them."))
    (work / "notes.txt").write_text("remember this\n")
    async with connected(Editor(), provider, home) as conn:
        sid = (await conn.new_session(cwd=str(work))).session_id
        await conn.prompt(session_id=sid, prompt=[acp.text_block("read my notes")])

    editor = Editor()
    provider.add(text("still with you"))
    async with connected(editor, provider, home) as conn:
        resumed = await conn.resume_session(cwd=str(work), session_id=sid)
        assert resumed.modes.current_mode_id == "ask"
        assert editor.updates == []  # nothing replayed
        answer = await conn.prompt(session_id=sid, prompt=[acp.text_block("and now?")])
        with pytest.raises(acp.RequestError, match="no session"):
            await conn.resume_session(cwd=str(work), session_id="20200101_000000_nosuch")
    assert answer.stop_reason == "end_turn"
    assert editor.text() == "still with you"
    assert user_texts(provider) == ["read my notes", "and now?"]
    assert "remember this" in str(provider.requests[-1].body["messages"])


async def test_close_ends_the_turn_stops_its_server_and_refuses_later_prompts(provider, folders):
    home, work = folders
    marker = uuid.uuid4().hex
    provider.add(call("mcp__clock__get_current_time", {"timezone": "UTC"}))
    provider.add(Stall(Reply(text="thinking for a very long time"), 3, seconds=60))
    editor = Editor()
    async with connected(editor, provider, home) as conn:
        session = await conn.new_session(cwd=str(work), mcp_servers=[time_server(marker)])
        sid = session.session_id
        turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("time?")]))
        await editor.wait_for(editor.text)
        assert len(processes_marked(marker)) == 1
        await asyncio.wait_for(conn.close_session(session_id=sid), 30)
        answer = await asyncio.wait_for(turn, 5)  # answered before close returned
        assert answer.stop_reason == "cancelled"
        await editor.wait_for(lambda: not processes_marked(marker), timeout=15)
        with pytest.raises(acp.RequestError, match="was closed"):
            await conn.prompt(session_id=sid, prompt=[acp.text_block("hello?")])
        with pytest.raises(acp.RequestError, match="unknown session"):
            await conn.close_session(session_id="20200101_000000_nosuch")

        provider.add(text("back again"))
        await conn.resume_session(cwd=str(work), session_id=sid)
        again = await conn.prompt(session_id=sid, prompt=[acp.text_block("hello?")])
    assert again.stop_reason == "end_turn"
    assert user_texts(provider) == ["time?", "hello?"]
    assert provider.invalid_requests == []
