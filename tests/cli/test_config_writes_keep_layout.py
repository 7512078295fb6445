"""Every way talaria writes config.yaml (`config set`, `mcp add` / `mcp remove`, an "always"
approval) changes only the entry concerned: the user's comments, blank lines, order, quoting
and indentation stay as they wrote them (they used to be rewritten away)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import scripted_agent
from talaria.cli.main import main
from talaria.testing import ScriptedProvider, calls, text

HAND_WRITTEN = """\
# my talaria settings
model:
    default: "qwen2.5-coder"   # the local one
    base_url: 'http://127.0.0.1:8080/v1'

# tools I trust
command_allowlist:
    - ls -la      # listing is fine
    - git status

context:
    engine: none
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "config.yaml").write_text(HAND_WRITTEN)
    return tmp_path


def test_config_set_changes_one_line(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "set", "model.default", "llama3", "--home", str(home)]) == 0
    assert (home / "config.yaml").read_text() == HAND_WRITTEN.replace(
        '"qwen2.5-coder"   # the local one', '"llama3"          # the local one'
    )
    assert main(["config", "set", "agent.max_turns", "12", "--home", str(home)]) == 0
    assert (
        (home / "config.yaml").read_text().endswith("    engine: none\nagent:\n    max_turns: 12\n")
    )


def test_mcp_add_then_remove_leaves_the_file_as_it_was(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mcp", "add", "--home", str(home), "clock", "--", "mcp-clock", "--utc"]) == 0
    assert (home / "config.yaml").read_text() == HAND_WRITTEN + (
        "mcp_servers:\n    clock:\n        command: mcp-clock\n        args:\n            - --utc\n"
    )
    assert main(["mcp", "remove", "--home", str(home), "clock"]) == 0
    assert (home / "config.yaml").read_text() == HAND_WRITTEN


def test_an_always_approval_appends_to_the_list_and_keeps_its_comments(
    provider: ScriptedProvider, home: Path
) -> None:
    target = home / "build"
    target.mkdir()
    provider.add(calls(("terminal", {"command": f"rm -rf {target}"})), text("gone"))
    with scripted_agent(
        provider, home, toolsets=["terminal"], tools=[], approval_callback=lambda _: "always"
    ) as agent:
        agent.run_conversation(user_message="clean up")
    assert not target.exists()
    assert (home / "config.yaml").read_text() == HAND_WRITTEN.replace(
        "    - git status\n", f"    - git status\n    - rm -rf {target}\n"
    )
