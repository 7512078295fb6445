"""acpx's everyday flow: `acpx sessions new` makes the session (talaria stores it at once),
then each `acpx prompt` in that folder loads it in a new `talaria acp` process and continues
it. A session stored only at its first turn was "no session" here, for this and every later
prompt in the folder."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from acp_editor import acpx_binary, agent_command, agent_env, talaria_cli
from talaria.testing import ScriptedProvider, text

pytestmark = pytest.mark.timeout(300)


def _said(stdout: str) -> str:
    messages = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    updates = [m["params"]["update"] for m in messages if m.get("method") == "session/update"]
    return "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )


@pytest.mark.npm
def test_sessions_new_then_prompts_continue_one_stored_session(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    acpx = acpx_binary()
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.yaml").write_text("context:\n  engine: none\nmemory:\n  enabled: false\n")
    provider.add(text("First answer."), text("Second answer."))
    agent = " ".join(shlex.quote(part) for part in agent_command(provider))
    base = [acpx, "--approve-all", "--format", "json", "--cwd", str(work), "--agent", agent]

    def acpx_run(*argv: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*base, *argv], capture_output=True, text=True, env=agent_env(home), timeout=150
        )
        assert done.returncode == 0, (argv, done.stdout[-3000:], done.stderr)
        return done

    created = json.loads(acpx_run("sessions", "new").stdout.splitlines()[-1])
    session_id = created["acpxSessionId"]
    assert session_id in talaria_cli(home, "sessions", "list").stdout
    try:  # the first prompt starts a new `talaria acp`, which loads the stored session
        assert _said(acpx_run("prompt", "hello").stdout) == "First answer."
        assert _said(acpx_run("prompt", "and again").stdout) == "Second answer."
    finally:  # acpx keeps that process for later prompts: end it
        acpx_run("sessions", "close")
    assert "hello" in json.dumps(provider.requests[-1].body["messages"])
    listed = talaria_cli(home, "sessions", "list").stdout.splitlines()[1:]
    assert [row.split()[0] for row in listed] == [session_id]
