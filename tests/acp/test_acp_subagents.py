"""A sub-agent's approval over ACP (`talaria acp` in a real subprocess, the ACP SDK's client as
the editor): the permission request names the sub-agent and is nested under the delegate_task
call, the editor's answer reaches the child, and a rejection reaches the parent as a denial."""

from __future__ import annotations

import json
from pathlib import Path

import acp
import pytest

from acp_editor import Editor, connected, editor_folders
from talaria.testing import ScriptedProvider, call, text

pytestmark = pytest.mark.timeout(120)


def delegate_result(provider: ScriptedProvider) -> dict:
    messages = provider.requests[-1].body["messages"]
    (content,) = [m["content"] for m in messages if m["role"] == "tool"]
    (entry,) = json.loads(content)["results"]
    return dict(entry)


async def clean_up(provider: ScriptedProvider, tmp_path: Path, answer: str) -> tuple[Editor, Path]:
    """One prompt whose sub-agent `cleaner` (a project definition) removes a folder; the
    editor answers its permission request with `answer`."""
    home, work = editor_folders(tmp_path)
    agents = work / ".talaria" / "agents"
    agents.mkdir(parents=True)
    (agents / "cleaner.md").write_text(
        "---\ndescription: Removes folders.\ntoolsets: [terminal]\n---\nYou remove folders.\n"
    )
    target = work / "scratch"
    target.mkdir()
    provider.add(
        call("delegate_task", {"agent": "cleaner", "goal": "remove scratch"}),
        call("terminal", {"command": f"rm -rf {target}"}),
        text("removed, all fine"),
        text("parent done"),
    )
    editor = Editor(answer=answer)
    async with connected(editor, provider, home) as conn:
        session = await conn.new_session(cwd=str(work))
        done = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("go")])
    assert done.stop_reason == "end_turn"
    return editor, target


async def test_a_childs_approval_is_asked_of_the_editor_nested_under_the_delegate_call(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    editor, target = await clean_up(provider, tmp_path, "allow-once")
    assert not target.exists()
    delegate, child = editor.starts()
    assert delegate.raw_input == {"agent": "cleaner", "goal": "remove scratch"}
    assert child.tool_call_id.startswith(f"{delegate.tool_call_id}/")
    assert child.title.startswith("cleaner: ") and child.kind == "execute"
    ((asked, _options),) = editor.permissions
    assert asked.tool_call_id == child.tool_call_id
    assert asked.title.startswith("cleaner: Run rm -rf ")
    assert asked.raw_input == {"command": f"rm -rf {target}"}
    assert editor.progress(child.tool_call_id)[-1].status == "completed"
    assert delegate_result(provider)["status"] == "completed"


async def test_a_childs_rejected_command_reaches_the_parent_as_a_denial(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    editor, target = await clean_up(provider, tmp_path, "reject-once")
    assert target.exists()
    assert len(editor.permissions) == 1
    entry = delegate_result(provider)
    assert entry["status"] == "denied"
    assert entry["denied"][0]["message"].startswith("Denied by the user")
