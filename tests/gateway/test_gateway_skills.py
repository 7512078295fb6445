"""`/<skill-name> request` from a chat platform runs the skill, like in the CLI."""

from __future__ import annotations

from pathlib import Path

from gateway_support import running_gateway
from talaria.gateway.fake import user_message
from talaria.testing import ScriptedProvider, text


async def test_a_skill_is_invoked_by_its_name_from_a_chat(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "standup"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: standup\ndescription: Summarise yesterday's commits\n---\nList by author."
    )
    server = ScriptedProvider([text("Ada: 3 commits.")])
    with server:
        async with running_gateway(server, tmp_path) as gw:
            await gw.platform.deliver(user_message("/standup for the web team"))
            await gw.platform.wait_for(lambda m: "Ada: 3 commits." in m.text)
    sent = server.requests[0].body["messages"][-1]["content"]
    assert sent.startswith("[The user invoked the skill /standup.")
    assert "List by author." in sent
    assert sent.endswith("The user's request: for the web team")
