"""Skills over ACP: `talaria acp` in a real subprocess offers the project's skills to the editor
as available commands, and a prompt `/<skill> request` runs the skill."""

from __future__ import annotations

from pathlib import Path

import acp
import pytest
from acp.schema import AvailableCommandsUpdate

from acp_editor import Editor, connected, editor_folders
from talaria.testing import ScriptedProvider, text

pytestmark = pytest.mark.timeout(120)


async def test_skills_are_available_commands_and_run_by_name(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    home, work = editor_folders(tmp_path)
    folder = work / ".agents" / "skills" / "release-notes"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: release-notes\ndescription: Write release notes from git log\n---\n"
        "Group the commits by feature."
    )
    provider.add(text("Notes written."))
    editor = Editor()
    async with connected(editor, provider, home) as conn:
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(work))).session_id
        (update,) = await editor.wait_for(lambda: editor.of(AvailableCommandsUpdate))
        assert [(c.name, c.description) for c in update.available_commands] == [
            ("release-notes", "Write release notes from git log")
        ]

        answer = await conn.prompt(
            session_id=sid, prompt=[acp.text_block("/release-notes for v2.1")]
        )

    assert answer.stop_reason == "end_turn"
    sent = provider.requests[0].body["messages"][-1]["content"]
    assert sent.startswith("[The user invoked the skill /release-notes.")
    assert "Group the commits by feature." in sent
    assert sent.endswith("The user's request: for v2.1")
