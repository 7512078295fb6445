"""An agent on the scripted provider with the file and terminal tools, in a fresh workspace,
and a hash of a workspace's files to compare trees by."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from helpers import scripted_agent
from talaria import Agent
from talaria.testing import calls, text
from talaria.testing.server import ScriptedProvider


def tree_hash(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Each file and link under `root` (but the folders named in `skip`) -> its content's hash."""
    out = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip]
        for name in files:
            path = Path(folder) / name
            data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
            out[str(path.relative_to(root))] = hashlib.sha256(data).hexdigest()
    return out


def workspace_agent(server: ScriptedProvider, tmp_path: Path, **config: Any) -> Agent:
    """An agent working in tmp_path/work, its talaria home in tmp_path/talaria; commands may
    run without asking (inside the sandbox)."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    config = {"approvals.mode": "off", **config}
    home = tmp_path / "talaria"
    return scripted_agent(
        server, home, tools=[], toolsets=["terminal", "file"], cwd=work, config=config
    )


def turn(server: ScriptedProvider, agent: Agent, *steps: tuple[str, dict[str, Any]]) -> None:
    """One turn in which the model takes `steps` (one tool call each), then answers; every
    step must have worked."""
    for step in steps:
        server.add(calls(step))
    server.add(text("done"))
    result = agent.run_conversation(user_message=f"do {len(steps)} step(s)")
    outputs = [str(m["content"]) for m in result["messages"] if m["role"] == "tool"]
    failed = [o for o in outputs if "exit code: " in o and "exit code: 0" not in o]
    failed += [o for o in outputs if o.lower().startswith(("error", "blocked"))]
    assert not failed, failed
