"""Skills and hooks from the command line: `talaria -p` with `--skill` or `/<skill> ...`, and
`talaria hooks list|trust|untrust`, as real subprocesses against the scripted provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_skills import example_skill

from pty_terminal import TALARIA, answer_with, provider  # noqa: F401
from talaria.testing.script import Reply
from talaria.testing.server import ScriptedProvider


def talaria(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TALARIA_HOME": str(home)}
    return subprocess.run(
        [TALARIA, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
        cwd=cwd, timeout=60,
    )  # fmt: skip


def endpoint(server: ScriptedProvider) -> list[str]:
    return ["-m", "scripted-model", "--base-url", server.openai_base_url, "--api-key", "k"]


def user_messages(server: ScriptedProvider) -> list[str]:
    return [m["content"] for m in server.requests[-1].body["messages"] if m["role"] == "user"]


def test_a_skill_reaches_a_one_shot_run_by_flag_or_by_name(provider, tmp_path: Path) -> None:  # noqa: F811
    home = tmp_path / "home"
    example_skill(home / "skills")
    answer_with(provider, {"summarise": Reply(text="Summarised.")})

    flagged = talaria(home, "-p", "summarise a.pdf", "--skill", "pdf-tools", *endpoint(provider))
    assert (flagged.returncode, flagged.stdout) == (0, "Summarised.\n"), flagged.stderr
    system = provider.requests[-1].body["messages"][0]["content"]
    assert "# Skill in use: pdf-tools" in system

    named = talaria(home, "-p", "/pdf-tools summarise b.pdf", *endpoint(provider), cwd=tmp_path)
    assert named.returncode == 0, named.stderr
    sent = user_messages(provider)[-1]
    assert sent.startswith("[The user invoked the skill /pdf-tools.")
    assert sent.endswith("The user's request: summarise b.pdf")

    unknown = talaria(home, "-p", "x", "--skill", "nope", *endpoint(provider))
    assert unknown.returncode == 2
    assert "no skill named nope; available skills: pdf-tools" in unknown.stderr


def test_hooks_list_trust_and_untrust_a_project(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    (project / ".talaria").mkdir(parents=True)
    home.mkdir()
    hook = {"type": "command", "command": f"{sys.executable} check.py", "timeout": 5}
    (project / ".talaria" / "settings.json").write_text(
        json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}})
    )

    listed = talaria(home, "hooks", "list", cwd=project)
    assert listed.returncode == 0, listed.stderr
    assert "NOT trusted: they do not run" in listed.stdout
    assert "PreToolUse [Bash]  command" in listed.stdout and "(timeout 5 s" in listed.stdout

    assert talaria(home, "hooks", "trust", str(project)).returncode == 0
    assert f"project ({project}, trusted)" in talaria(home, "hooks", "list", cwd=project).stdout

    assert talaria(home, "hooks", "untrust", cwd=project).returncode == 0
    assert "NOT trusted" in talaria(home, "hooks", "list", cwd=project).stdout
    empty = talaria(home, "hooks", "trust", str(tmp_path))
    assert empty.returncode == 2 and "has no .talaria/settings.json" in empty.stderr
