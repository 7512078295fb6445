"""A sub-agent's approval in `talaria chat` (a real pseudo-terminal): the prompt names the
sub-agent and its task, the user's key press reaches the child, its calls show under the
delegate_task line, and a denial reaches the parent's model as a denial."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pty_terminal import chat, provider  # noqa: F401
from talaria.testing import Reply, Script, ScriptedProvider, call, text


def cleaner_script(target: Path) -> Script:
    """The parent delegates to `cleaner`, which tries to remove `target`; the parent then
    says what status its child ended with."""

    def step(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        child = any("Goal:" in str(m.get("content")) for m in messages if m["role"] == "user")
        answered = messages[-1]["role"] == "tool"
        if child:
            if answered:
                return text("all cleaned up")
            return call("terminal", {"command": f"rm -rf {target}"})
        if answered:
            (entry,) = json.loads(messages[-1]["content"])["results"]
            return text(f"the cleaner ended {entry['status']}")
        return call("delegate_task", {"agent": "cleaner", "goal": "remove build"})

    return Script(fallback=step)


@pytest.mark.pty
def test_a_childs_approval_is_asked_in_the_cli_and_a_denial_reaches_the_parent(
    provider: ScriptedProvider,  # noqa: F811
    chat: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    target = tmp_path / "build"
    target.mkdir()
    agents = tmp_path / ".talaria" / "agents"
    agents.mkdir(parents=True)
    (agents / "cleaner.md").write_text("---\ndescription: Cleans.\ntools: Bash\n---\nClean.\n")
    provider.script = cleaner_script(target)
    terminal = chat(toolsets="terminal,delegation")
    terminal.send("clean up")
    terminal.expect("[cleaner: remove build] terminal needs your approval")
    terminal.expect("allow? [o]nce [s]ession [a]lways [d]eny")
    terminal.send("d")
    terminal.expect("↳ cleaner: ✗ terminal")
    terminal.expect("the cleaner ended denied")
    assert target.exists()
    terminal.assert_clean()
