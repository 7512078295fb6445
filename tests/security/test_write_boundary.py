"""One boundary for every write: write_file and patch are held where sandboxed commands are.

Each case is one the issue found on main: an in-process write outside the workspace or into a
file that runs code later, unasked; a symlink flipped between the check and the write; a
relative writable root swapped for a link to the home directory."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from boundary_helpers import make_agent, need_sandbox, turn, world_fixture  # noqa: F401

from helpers import tool_results
from talaria.testing import ScriptedProvider, calls, text
from talaria.tools import write_boundary
from talaria.tools.write_boundary import judge

need_sandbox()


def _asker(answer: str, asked: list[Any]) -> Any:
    return lambda request: asked.append(request) or answer


@pytest.mark.parametrize("answer", ["once", "deny"])
def test_a_write_outside_the_roots_is_an_approval_request(
    provider: ScriptedProvider, world: dict[str, Path], answer: str
) -> None:
    asked: list[Any] = []
    target = world["outside"] / "note.txt"
    agent = make_agent(provider, world, approval_callback=_asker(answer, asked))
    (result,) = turn(provider, agent, ("write_file", {"path": str(target), "content": "hi\n"}))
    assert [request.command for request in asked] == [f"(outside the sandbox) write {target}"]
    assert "outside the sandbox's writable roots" in asked[0].reason
    assert target.exists() == (answer == "once"), result


def test_approvals_off_refuses_a_write_outside_the_roots_unless_full_access(
    provider: ScriptedProvider, world: dict[str, Path]
) -> None:
    target = world["outside"] / "note.txt"
    step = ("write_file", {"path": str(target), "content": "hi\n"})
    (refused,) = turn(provider, make_agent(provider, world, approvals="off"), step)
    assert refused.startswith("Refused") and not target.exists()
    (written,) = turn(
        provider, make_agent(provider, world, mode="full-access", approvals="off"), step
    )
    assert written.startswith("Created") and target.read_text() == "hi\n"


def test_read_only_mode_asks_for_every_write(
    provider: ScriptedProvider, world: dict[str, Path]
) -> None:
    agent = make_agent(provider, world, mode="read-only")
    (result,) = turn(provider, agent, ("write_file", {"path": "a.txt", "content": "x"}))
    assert result.startswith("Denied") and not (world["work"] / "a.txt").exists()


def _protected(world: dict[str, Path]) -> list[str]:
    """Paths inside the workspace (which is also HOME here) whose content runs later."""
    work = world["work"]
    (work / ".git" / "hooks").mkdir(parents=True)
    (work / ".git" / "config").write_text("[core]\n")
    copied = work / "vendor" / "copy"
    (copied / "objects").mkdir(parents=True)
    (copied / "HEAD").write_text("ref: refs/heads/main\n")
    site = work / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    return [
        ".git/config",
        ".git/hooks/pre-commit",
        ".git/commondir",
        "sub/.git",
        "vendor/copy/config",
        ".bashrc",
        ".bash_aliases",
        ".profile",
        ".gitconfig",
        ".config/autostart/evil.desktop",
        ".config/systemd/user/evil.service",
        ".ssh/authorized_keys",
        f"{site.relative_to(work)}/evil.pth",
        "th/plugins/evil.py",
        "th/SOUL.md",
        "th/memories/MEMORY.md",
        "th/config.yaml",
    ]


@pytest.mark.parametrize("approvals", ["manual", "off"])
def test_protected_files_inside_the_roots_are_never_written_unasked(
    provider: ScriptedProvider,
    world: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    approvals: str,
) -> None:
    work = world["work"]
    monkeypatch.setenv("HOME", str(work))
    paths = _protected(world)
    agent = make_agent(provider, world, approvals=approvals, home=work / "th")
    steps = [("write_file", {"path": path, "content": "echo pwned\n"}) for path in paths]
    results = turn(provider, agent, *steps)
    verdict = "Denied" if approvals == "manual" else "Refused"
    for path, result in zip(paths, results, strict=True):
        assert result.startswith(verdict), (path, result)
        assert "pwned" not in ((work / path).read_text() if (work / path).is_file() else "")


def test_a_protected_write_asks_and_is_written_once_approved(
    provider: ScriptedProvider, world: dict[str, Path]
) -> None:
    (world["work"] / ".git").mkdir()
    (world["work"] / ".git" / "config").write_text("[core]\n")
    asked: list[Any] = []
    agent = make_agent(provider, world, approval_callback=_asker("once", asked))
    step = ("patch", {"path": ".git/config", "old_string": "[core]", "new_string": "[user]"})
    (result,) = turn(provider, agent, step)
    assert "git metadata" in asked[0].reason and "Patched" in result
    assert (world["work"] / ".git" / "config").read_text() == "[user]\n"


def test_a_link_flipped_between_the_check_and_the_write_cannot_move_it(
    provider: ScriptedProvider, world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor judges `link/authorized_keys` inside the workspace; then, before the tool
    writes, the link is pointed at a stand-in for ~/.ssh. The write must fail, not land there."""
    inside, ssh = world["work"] / "docs", world["outside"]
    inside.mkdir()
    link = world["work"] / "link"
    link.symlink_to(inside)
    judged = write_boundary.judge

    def judge_then_flip(path: Path, sandbox: Any, home: Any) -> Any:
        verdict = judged(path, sandbox, home)
        if link.is_symlink() and os.readlink(link) == str(inside):
            link.unlink()
            link.symlink_to(ssh)
        return verdict

    monkeypatch.setattr(write_boundary, "judge", judge_then_flip)
    agent = make_agent(provider, world, approvals="off")
    step = ("write_file", {"path": "link/authorized_keys", "content": "ssh-ed25519 AAAA evil\n"})
    (result,) = turn(provider, agent, step)
    assert "was not written" in result, result
    assert not (ssh / "authorized_keys").exists() and not (inside / "authorized_keys").exists()


@pytest.mark.parametrize("approvals", ["manual", "off"])
def test_a_background_flipper_never_lands_a_write_outside_the_roots(
    provider: ScriptedProvider, world: dict[str, Path], approvals: str
) -> None:
    """A process flips `link` (a directory component) between the workspace and the stand-in
    for ~/.ssh as fast as it can while the model writes through it again and again."""
    inside, ssh = world["work"] / "docs", world["outside"]
    inside.mkdir()
    link, spare = world["work"] / "link", world["work"] / ".link.next"
    link.symlink_to(inside)
    stop = threading.Event()
    flips = 0

    def flipper() -> None:
        nonlocal flips
        while not stop.is_set() and flips < 2_000_000:
            target = ssh if flips % 2 else inside
            spare.unlink(missing_ok=True)
            spare.symlink_to(target)
            os.replace(spare, link)  # atomic: the link always exists, pointing one way or the other
            flips += 1

    thread = threading.Thread(target=flipper, daemon=True)
    thread.start()
    try:
        agent = make_agent(provider, world, approvals=approvals, approval_callback=lambda r: "deny")
        steps = [
            ("write_file", {"path": "link/authorized_keys", "content": f"key {n}\n"})
            for n in range(40)
        ]
        results = turn(provider, agent, *steps)
    finally:
        stop.set()
        thread.join(10)
    assert flips > 0 and len(results) == 40
    assert not (ssh / "authorized_keys").exists()


def test_a_relative_root_replaced_by_a_link_widens_nothing(
    provider: ScriptedProvider, world: dict[str, Path]
) -> None:
    extra = world["work"].parent / "extra"
    extra.mkdir()
    config = {"sandbox.writable_roots": ["../extra"]}
    agent = make_agent(provider, world, approvals="off", config=config)
    swap = f"mv {extra} {extra}.old && ln -s {world['user']} {extra}"
    with agent:
        provider.add(calls(("terminal", {"command": f"touch {extra}/before"})), text("ok"))
        first = tool_results(agent.run_conversation(user_message="one"))
        subprocess.run(swap, shell=True, check=True)  # outside the sandbox: the user, say
        provider.add(
            calls(("terminal", {"command": f"touch {extra}/after"})),
            calls(("write_file", {"path": f"{extra}/after.txt", "content": "x"})),
            text("ok"),
        )
        command, write = tool_results(agent.run_conversation(user_message="two"))[-2:]
    assert "exit code: 0" in first[0]
    assert "no longer the directory" in command and write.startswith("Refused")
    assert not (world["user"] / "after").exists() and not (world["user"] / "after.txt").exists()


def test_git_metadata_is_read_only_to_commands_whatever_its_name(
    provider: ScriptedProvider, world: dict[str, Path]
) -> None:
    work = world["work"]
    (work / ".git" / "hooks").mkdir(parents=True)
    (work / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (work / ".git" / "objects").mkdir()
    (work / "wt").mkdir()
    (work / "wt" / ".git").write_text(f"gitdir: {work / 'gitdirs' / 'wt'}\n")
    (work / "gitdirs" / "wt").mkdir(parents=True)
    agent = make_agent(provider, world, approvals="off")
    steps = [
        "mv .git .git2",
        "echo ../../elsewhere > .git/commondir",
        "echo '[core] fsmonitor = touch /pwned' >> .git/config",
        "echo evil > .git/hooks/pre-commit",
        "echo 'gitdir: /elsewhere' > wt/.git",
        "echo x > gitdirs/wt/commondir",
        "echo fine > ok.txt",
    ]
    results = turn(provider, agent, *(("terminal", {"command": step}) for step in steps))
    for step, result in zip(steps[:-1], results, strict=False):
        assert "exit code: 0" not in result, (step, result)
    assert "exit code: 0" in results[-1]
    assert (work / ".git").is_dir() and not (work / ".git2").exists()
    assert not (work / ".git" / "commondir").exists()
    assert (work / "wt" / ".git").read_text().startswith(f"gitdir: {work}")


def test_talaria_and_its_interpreter_are_read_only_even_inside_a_root(
    provider: ScriptedProvider, world: dict[str, Path]
) -> None:
    package = Path(write_boundary.__file__).resolve().parent.parent
    roots = [str(package), sys.prefix]
    agent = make_agent(provider, world, approvals="off", config={"sandbox.writable_roots": roots})
    canary = f"talaria-boundary-canary-{os.getpid()}.py"
    steps = [("terminal", {"command": f"touch {root}/{canary}"}) for root in roots]
    results = turn(provider, agent, *steps)
    for root, result in zip(roots, results, strict=True):
        assert "Read-only file system" in result, result
        assert not (Path(root) / canary).exists()


def test_without_a_sandbox_protected_and_system_files_still_ask(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    user = world["user"]
    (user / "project").mkdir()
    (user / ".bashrc").write_text("# rc\n")
    link = user / "project" / "innocent.txt"
    link.symlink_to(user / ".bashrc")
    th = world["th"]
    for path in (
        user / ".bashrc",
        user / ".ssh" / "authorized_keys",
        th / "config.yaml",
        th / "plugins" / "x.py",
        Path("/etc/hosts"),
        Path("/usr/local/bin/tool"),
        link,
    ):
        assert judge(path, None, th) is not None, path
    for path in (user / "project" / "main.py", user / "project" / ".bashrc", th / "logs" / "x"):
        assert judge(path, None, th) is None, path


def test_git_metadata_a_command_creates_is_renamed_aside_unless_escalated(
    provider: ScriptedProvider, world: dict[str, Path]
) -> None:
    """A copied `.git` with a fresh config, a new `git init`, a bare-shaped directory: none is
    left for the user's git to trust; an approved escalation keeps what it made."""
    work = world["work"]
    (work / ".git" / "objects").mkdir(parents=True)
    (work / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (work / "sub").mkdir()
    hook = "[core]\n\tfsmonitor = touch /pwned\n"
    steps = [
        "echo warm-up",
        f"cp -r .git sub/.git && printf '{hook}' > sub/.git/config",
        "mkdir -p new/deep && git init -q new/deep",
        "mkdir -p bare/objects bare/refs && echo 'ref: refs/heads/x' > bare/HEAD",
    ]
    agent = make_agent(provider, world, approvals="off")
    results = turn(provider, agent, *(("terminal", {"command": step}) for step in steps))
    for result in results[1:]:
        assert "renamed aside" in result and "escalate=true" in result, result
    assert (
        not (work / "sub" / ".git").exists() and (work / "sub" / ".git.blocked-by-talaria").is_dir()
    )
    assert not (work / "new" / "deep" / ".git").exists()
    assert not (work / "bare" / "HEAD").exists()
    assert (work / ".git" / "HEAD").exists(), "the repository that was there stays"

    kept = make_agent(provider, world, approval_callback=lambda request: "once")
    init = {"command": "git init -q kept", "escalate": True, "justification": "a new repo"}
    (escalated, after) = turn(
        provider, kept, ("terminal", init), ("terminal", {"command": "touch kept/.git/x"})
    )
    assert "renamed aside" not in escalated and (work / "kept" / ".git" / "HEAD").exists()
    assert "Read-only file system" in after and not (work / "kept" / ".git" / "x").exists()
