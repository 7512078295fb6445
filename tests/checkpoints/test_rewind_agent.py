"""Rewind through the agent: whatever tool changed the files (write_file, patch, `sed -i`, a
script), rewinding to before a turn brings back exactly that turn's tree; the user's own
edits, files over the size cap and ignored folders are left as they are."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from checkpoint_support import tree_hash, turn, workspace_agent

from helpers import scripted_agent
from talaria import tool
from talaria.testing import calls, text
from talaria.testing.server import ScriptedProvider

SCRIPT = 'mkdir -p "gen dir" && echo made > "gen dir/é.txt" && rm "notes/ünï file.txt" && rm -r old'


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


def _seed(work: Path) -> None:
    (work / "notes").mkdir(parents=True)
    (work / "old").mkdir()
    (work / "app.py").write_text("print(1)\n")
    (work / "notes" / "ünï file.txt").write_text("spaced and non-ASCII\n")
    (work / "old" / "a.txt").write_text("old a\n")
    (work / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    (work / "tool.sh").chmod(0o755)


def test_rewinding_to_before_each_turn_restores_that_tree(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    _seed(work)
    trees = [tree_hash(work)]
    with workspace_agent(provider, tmp_path) as agent:
        turn(
            provider,
            agent,
            ("write_file", {"path": "app.py", "content": "print(2)\n"}),
            ("write_file", {"path": "new dir/ñ name.txt", "content": "fresh\n"}),
            ("patch", {"path": "tool.sh", "old_string": "hi", "new_string": "hello"}),
        )
        trees.append(tree_hash(work))
        turn(provider, agent, ("terminal", {"command": "sed -i 's/2/3/' app.py"}))
        trees.append(tree_hash(work))
        turn(provider, agent, ("terminal", {"command": SCRIPT}))
        assert (work / "gen dir" / "é.txt").exists() and not (work / "old").exists()
        diff = agent.diff()
        assert "+print(3)" in diff and "-print(1)" in diff and "gen dir/é.txt" in diff
        assert [len(c.changed) for c in agent.checkpoints()] == [3, 1, 3]

        for number in (3, 2, 1):
            report = agent.rewind(number, conversation=False)
            assert tree_hash(work) == trees[number - 1], f"rewind to before turn {number}"
            assert report.kept == () and report.left_alone == ()
        assert (work / "tool.sh").stat().st_mode & 0o111 == 0o111
        assert not (work / "gen dir").exists() and not (work / "new dir").exists()

        agent.rewind(report.undo or 0, conversation=False)  # the last rewind, undone
        assert tree_hash(work) == trees[1]


def test_a_rewind_of_the_conversation_drops_the_later_turns(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    with workspace_agent(provider, tmp_path) as agent:
        turn(provider, agent, ("write_file", {"path": "a.txt", "content": "a\n"}))
        kept = len(agent.messages)
        turn(provider, agent, ("write_file", {"path": "b.txt", "content": "b\n"}))
        report = agent.rewind(2, files=False)
        assert report.conversation and report.restored == ()
        assert len(agent.messages) == kept and (tmp_path / "work" / "b.txt").exists()
        assert len(agent.store.load_messages(agent.session_id or "")) == kept
        with pytest.raises(ValueError, match="already rewound away"):
            agent.rewind(2)


def test_the_users_own_edits_are_kept_and_reported(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a0\n")
    (work / "b.txt").write_text("b0\n")
    with workspace_agent(provider, tmp_path) as agent:
        turn(
            provider,
            agent,
            ("write_file", {"path": "a.txt", "content": "a1\n"}),
            ("write_file", {"path": "b.txt", "content": "b1\n"}),
        )
        (work / "a.txt").write_text("mine\n")  # by hand, between turns
        (work / "c.txt").write_text("my new file\n")
        turn(provider, agent, ("write_file", {"path": "d.txt", "content": "d\n"}))
        report = agent.rewind(1)
    assert (work / "a.txt").read_text() == "mine\n"
    assert (work / "b.txt").read_text() == "b0\n"
    assert (work / "c.txt").read_text() == "my new file\n"
    assert not (work / "d.txt").exists()
    assert report.kept == ("a.txt",) and report.restored == ("b.txt", "d.txt")
    assert "a.txt" in report.summary() and "kept as you left them" in report.summary()


def test_files_over_the_cap_and_ignored_folders_are_never_touched(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    for folder in ("node_modules/lib", ".venv/bin", "build", ".git"):
        (work / folder).mkdir(parents=True)
    (work / ".gitignore").write_text("build/\n")
    (work / "big.bin").write_bytes(b"x" * 5000)
    (work / "grows.txt").write_text("small\n")
    (work / "plain.txt").write_text("plain\n")
    (work / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    command = (
        "echo changed > node_modules/lib/index.js && echo v > .venv/bin/tool && "
        "echo obj > build/out.o && head -c 6000 /dev/zero > big.bin && "
        "head -c 6000 /dev/zero > grows.txt && echo edited > plain.txt"
    )
    with workspace_agent(provider, tmp_path, **{"checkpoints.max_file_bytes": 1000}) as agent:
        turn(provider, agent, ("terminal", {"command": command}))
        report = agent.rewind(1, conversation=False)
    assert (work / "plain.txt").read_text() == "plain\n"
    assert report.restored == ("plain.txt",) and report.left_alone == ("grows.txt",)
    assert (work / "grows.txt").stat().st_size == 6000
    assert (work / "big.bin").read_bytes() == b"\0" * 6000
    for path in ("node_modules/lib/index.js", ".venv/bin/tool", "build/out.o"):
        assert (work / path).exists(), path
    assert (work / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert not (tmp_path / "work" / ".git" / "index").exists(), "the user's .git is not used"


def test_an_agent_whose_tools_cannot_write_takes_no_snapshots(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    home = tmp_path / "talaria"
    with scripted_agent(provider, home, tools=[], toolsets=["todo", "web"], cwd=tmp_path) as agent:
        provider.add(text("nothing to change"))
        agent.chat("look only")
        (turn,) = agent.checkpoints()
        assert turn.changed == () and agent.rewind(1, files=False).conversation
    assert not list((home / "checkpoints").glob("*/roots"))


def test_steps_of_custom_tools_take_no_snapshot_but_the_turn_catches_their_changes(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()

    @tool
    def note(text: str) -> str:
        """Append a line to notes.txt.

        Args:
            text: the line
        """
        with open(work / "notes.txt", "a") as notes:
            notes.write(text + "\n")
        return "noted"

    home = tmp_path / "talaria"
    with scripted_agent(provider, home, tools=[note], toolsets=["file"], cwd=work) as agent:
        for line in ("one", "two"):
            provider.add(calls(("note", {"text": line})))
        provider.add(calls(("write_file", {"path": "last.txt", "content": "last\n"})))
        provider.add(text("done"))
        agent.chat("note twice, then write")
        (summary,) = agent.checkpoints()
        assert summary.steps == ("write_file",), "only the step that calls a file tool"
        assert set(summary.changed) == {"notes.txt", "last.txt"}
        agent.rewind(1, conversation=False)
        assert sorted(os.listdir(work)) == []


BACKGROUND_WRITER = (
    "while [ ! -e go ]; do sleep 0.05; done; echo from the background > 'bg out.txt'; touch done"
)
RELEASE_IT = "touch go; while [ ! -e done ]; do sleep 0.05; done"
"""Lets the background writer go and waits until it has written."""


def test_a_background_process_is_caught_before_the_next_step_and_rewound(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    _seed(work)
    before = tree_hash(work)
    with workspace_agent(provider, tmp_path) as agent:
        turn(
            provider,
            agent,
            ("terminal", {"command": BACKGROUND_WRITER, "background": True}),
            ("terminal", {"command": RELEASE_IT}),
            ("write_file", {"path": "last.txt", "content": "last\n"}),
        )
        assert (work / "bg out.txt").read_text() == "from the background\n"
        (summary,) = agent.checkpoints()
        assert summary.steps == ("terminal", "terminal", "write_file")
        assert {"bg out.txt", "go", "done", "last.txt"} <= set(summary.changed)

        step = agent.rewind(1, step=3)  # before the write: the background's file was there
        assert step.restored == ("last.txt",) and not step.conversation
        assert (work / "bg out.txt").exists() and not (work / "last.txt").exists()
        assert len(agent.messages) > 1, "a step rewinds the files only"

        whole = agent.rewind(1, conversation=False)
        assert "bg out.txt" in whole.restored
        assert tree_hash(work) == before


@pytest.mark.npm
def test_an_mcp_tools_changes_are_caught_and_rewound(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    from mcp_support import npm_binary

    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("one\n")
    before = tree_hash(work)
    server = {"command": npm_binary("mcp-server-filesystem"), "args": [str(work)]}
    write = "mcp__files__write_file"
    provider.add(
        calls((write, {"path": str(work / "by mcp.txt"), "content": "made by the server\n"})),
        calls((write, {"path": str(work / "notes.txt"), "content": "two\n"})),
        text("done"),
    )
    with scripted_agent(
        provider, tmp_path / "talaria", tools=[], toolsets=[], cwd=work,
        mcp_servers={"files": {**server, "approval": "allow"}},
    ) as agent:  # fmt: skip
        agent.run_conversation("write with the server")
        assert (work / "notes.txt").read_text() == "two\n"
        (summary,) = agent.checkpoints()
        assert summary.steps == (write, write)
        assert sorted(summary.changed) == ["by mcp.txt", "notes.txt"]

        assert agent.rewind(1, step=2).restored == ("notes.txt",)
        assert (work / "notes.txt").read_text() == "one\n" and (work / "by mcp.txt").exists()
        agent.rewind(1)
        assert tree_hash(work) == before and agent.messages == []
