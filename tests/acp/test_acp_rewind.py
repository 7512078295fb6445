"""`_talaria/rewind` through ACP: `talaria acp` in a real subprocess, driven by the SDK's client.
A turn edits a file in the session's folder; the extension method puts it back, empties the
conversation, and refuses a turn that does not exist."""

from __future__ import annotations

from pathlib import Path

import acp
import pytest

from acp_editor import Editor, connected, editor_folders
from talaria.testing import ScriptedProvider, call, text

pytestmark = pytest.mark.timeout(120)


async def test_rewind_restores_the_files_of_a_turn(
    provider: ScriptedProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    (tmp_path / "user-home").mkdir()
    home, work = editor_folders(tmp_path)
    (work / "a.txt").write_text("one\n")
    provider.add(call("terminal", {"command": "echo two > a.txt"}), text("Edited."))
    async with connected(Editor(), provider, home) as conn:
        hello = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        assert hello.agent_capabilities.field_meta["talaria"]["rewind"] is True
        sid = (await conn.new_session(cwd=str(work))).session_id
        done = await conn.prompt(session_id=sid, prompt=[acp.text_block("edit a.txt")])
        assert done.stop_reason == "end_turn" and (work / "a.txt").read_text() == "two\n"
        with pytest.raises(acp.RequestError, match="no checkpoint 5"):
            await conn.ext_method("talaria/rewind", {"sessionId": sid, "turn": 5})
        before_step = {"sessionId": sid, "turn": 1, "step": 1}
        step = await conn.ext_method("talaria/rewind", before_step)  # the files only
        assert step["restored"] == ["a.txt"] and step["conversation"] is False
        assert step["step"] == 1 and (work / "a.txt").read_text() == "one\n"
        with pytest.raises(acp.RequestError, match="must be numbers"):
            await conn.ext_method("talaria/rewind", {**before_step, "step": "1"})
        undo = {"sessionId": sid, "turn": step["undo"], "conversation": False}
        await conn.ext_method("talaria/rewind", undo)
        assert (work / "a.txt").read_text() == "two\n"
        report = await conn.ext_method("talaria/rewind", {"sessionId": sid, "turn": 1})
    assert report["restored"] == ["a.txt"] and report["conversation"] is True
    assert (work / "a.txt").read_text() == "one\n"
