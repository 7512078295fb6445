"""The command sandbox as the model meets it: real bubblewrap, real files, a real socket."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import outside_tmp, tool_results
from talaria import Agent
from talaria.testing import ScriptedProvider, calls, text
from talaria.tools.sandbox_probe import sandbox_support

pytestmark = pytest.mark.bwrap

if not sandbox_support().available:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI needs bubblewrap for the sandbox tests: {sandbox_support().detail}")
    pytest.skip(sandbox_support().detail, allow_module_level=True)


@pytest.fixture
def dirs() -> Iterator[dict[str, Path]]:
    """A workspace, a directory beside it and a talaria home, outside /tmp: the sandbox gives
    every command a private /tmp, which would hide a directory there rather than protect it."""
    base = outside_tmp()
    names = {"work": base / "work", "outside": base / "outside", "home": base / "th"}
    for path in names.values():
        path.mkdir()
    (names["work"] / ".git" / "hooks").mkdir(parents=True)
    yield names
    shutil.rmtree(base)


@pytest.fixture
def listener() -> Iterator[int]:
    """A loopback TCP server that accepts connections until the test ends."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(2)
    server.close()


def make_agent(
    server: ScriptedProvider, dirs: dict[str, Path], mode: str = "workspace-write", **kw: Any
) -> Agent:
    config = {"context.engine": "none", "sandbox.mode": mode, **kw.pop("config", {})}
    return Agent(
        model="scripted-model",
        base_url=server.openai_base_url,
        api_key="test-key",
        home=dirs["home"],
        cwd=dirs["work"],
        toolsets=["terminal"],
        config=config,
        **kw,
    )


def run(server: ScriptedProvider, agent: Agent, *commands: str | dict[str, Any]) -> list[str]:
    """One turn in which the model runs each command in turn; the tool results."""
    for command in commands:
        arguments = {"command": command} if isinstance(command, str) else command
        server.add(calls(("terminal", arguments)))
    server.add(text("done"))
    with agent:
        return tool_results(agent.run_conversation(user_message="go"))


def _commands(dirs: dict[str, Path], port: int) -> list[str]:
    return [
        "echo inside > inside.txt && echo wrote-inside",
        f"echo outside > {dirs['outside']}/outside.txt",
        f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected",
        "echo evil > .git/hooks/pre-commit",
    ]


def test_workspace_write_confines_writes_network_and_git_hooks(
    provider: ScriptedProvider, dirs: dict[str, Path], listener: int
) -> None:
    agent = make_agent(provider, dirs, config={"approvals.mode": "off"})
    inside, outside, network, hooks = run(provider, agent, *_commands(dirs, listener))

    assert "wrote-inside" in inside and (dirs["work"] / "inside.txt").read_text() == "inside\n"
    assert "Read-only file system" in outside
    assert "[sandbox:" in outside and "escalate=true" in outside
    assert not (dirs["outside"] / "outside.txt").exists()
    assert "connected" not in network and "no network access" in network
    assert "Read-only file system" in hooks
    assert not (dirs["work"] / ".git" / "hooks" / "pre-commit").exists()


def test_full_access_runs_the_same_commands_unconfined(
    provider: ScriptedProvider, dirs: dict[str, Path], listener: int
) -> None:
    agent = make_agent(provider, dirs, mode="full-access", config={"approvals.mode": "off"})
    inside, outside, network, hooks = run(provider, agent, *_commands(dirs, listener))

    assert "wrote-inside" in inside
    assert (dirs["outside"] / "outside.txt").read_text() == "outside\n"
    assert "connected" in network
    assert (dirs["work"] / ".git" / "hooks" / "pre-commit").exists()
    assert not any("[sandbox:" in result for result in (inside, outside, network, hooks))


def test_network_can_be_allowed_by_config(
    provider: ScriptedProvider, dirs: dict[str, Path], listener: int
) -> None:
    nested = {"approvals.mode": "off", "sandbox": {"network": True}}  # Agent(config=...) form
    agent = make_agent(provider, dirs, config=nested)
    (network,) = run(provider, agent, f"exec 3<>/dev/tcp/127.0.0.1/{listener} && echo connected")
    assert "connected" in network


def test_root_inside_the_sandbox_cannot_remount_or_touch_the_talaria_home(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    (dirs["home"] / "config.yaml").write_text("model: {default: scripted-model}\n")
    agent = make_agent(provider, dirs, config={"approvals.mode": "off"})
    remount, capabilities, home = run(
        provider,
        agent,
        "mount -o remount,rw / && echo REMOUNTED",
        "grep CapEff /proc/self/status",
        f"echo x >> {dirs['home']}/config.yaml",
    )
    assert "REMOUNTED" not in remount and "exit code: 0" not in remount
    assert "CapEff:\t0000000000000000" in capabilities
    assert "Read-only file system" in home or "Permission denied" in home  # hidden: /dev/null
    assert (dirs["home"] / "config.yaml").read_text() == "model: {default: scripted-model}\n"


def test_other_processes_are_invisible_and_the_result_says_why(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    agent = make_agent(provider, dirs, config={"approvals.mode": "off"})
    (result,) = run(provider, agent, f"kill -0 {os.getpid()}")
    assert "No such process" in result and "own process namespace" in result


def test_read_only_mode_allows_only_a_private_tmp(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    agent = make_agent(provider, dirs, mode="read-only", config={"approvals.mode": "off"})
    project, scratch = run(
        provider, agent, "echo x > inside.txt", "echo x > /tmp/scratch && cat /tmp/scratch"
    )
    assert "Read-only file system" in project and not (dirs["work"] / "inside.txt").exists()
    assert "exit code: 0" in scratch


def test_the_private_tmp_hides_the_real_one_and_says_so(
    provider: ScriptedProvider, dirs: dict[str, Path], tmp_path: Path
) -> None:
    (tmp_path / "real.txt").write_text("on the host")
    agent = make_agent(provider, dirs, config={"approvals.mode": "off"})
    (result,) = run(provider, agent, f"cat {tmp_path}/real.txt")
    assert "on the host" not in result and "private /tmp" in result


def test_a_file_missing_from_a_workspace_in_tmp_is_not_blamed_on_the_sandbox(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    """The working directory is visible below the private /tmp: a script run before it is
    written fails as it would outside, with no advice to escalate."""
    work = Path(tempfile.mkdtemp(prefix="talaria-work-", dir="/tmp"))
    try:
        (work / "there.txt").write_text("in the workspace")
        agent = make_agent(provider, {**dirs, "work": work}, config={"approvals.mode": "off"})
        there, missing = run(provider, agent, "cat there.txt", f"python3 {work}/hello.py")
    finally:
        shutil.rmtree(work)
    assert "in the workspace" in there
    assert "No such file or directory" in missing and "sandbox" not in missing


def test_extra_writable_roots_are_writable(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    roots = {"approvals.mode": "off", "sandbox.writable_roots": [str(dirs["outside"])]}
    agent = make_agent(provider, dirs, config=roots)
    (result,) = run(provider, agent, f"echo ok > {dirs['outside']}/allowed.txt")
    assert "exit code: 0" in result and (dirs["outside"] / "allowed.txt").exists()


@pytest.mark.parametrize("answer", ["once", "deny"])
def test_escalation_is_an_approval_request(
    provider: ScriptedProvider, dirs: dict[str, Path], answer: str
) -> None:
    asked: list[Any] = []

    def approve(request: Any) -> str:
        asked.append(request)
        return answer

    target = dirs["outside"] / "escalated.txt"
    escalate = {
        "command": f"echo hi > {target}",
        "escalate": True,
        "justification": "the user asked for a file next to the project",
    }
    agent = make_agent(provider, dirs, approval_callback=approve)
    confined, escalated = run(provider, agent, f"echo hi > {target}", escalate)

    assert "[sandbox:" in confined and len(asked) == 1
    assert "outside the sandbox" in asked[0].reason and "next to the project" in asked[0].reason
    assert asked[0].command == f"(outside the sandbox) echo hi > {target}"
    assert target.exists() == (answer == "once"), escalated


def test_escalation_is_refused_when_approvals_are_off(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    """Approvals off stop the asking; they never let a command out of the sandbox."""
    target = dirs["outside"] / "escalated.txt"
    agent = make_agent(provider, dirs, config={"approvals.mode": "off"})
    (result,) = run(provider, agent, {"command": f"touch {target}", "escalate": True})
    assert result.startswith("Refused") and "without escalate=true" in result
    assert not target.exists()


def test_escalation_without_an_approver_is_denied(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    target = dirs["outside"] / "escalated.txt"
    agent = make_agent(provider, dirs)
    (result,) = run(provider, agent, {"command": f"touch {target}", "escalate": True})
    assert result.startswith("Denied") and not target.exists()


def test_background_processes_run_in_the_same_sandbox(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    target = dirs["outside"] / "background.txt"
    agent = make_agent(provider, dirs, config={"approvals.mode": "off"})
    provider.add(
        calls(("terminal", {"command": f"touch {target}; touch inside.txt", "background": True})),
        text("started"),
    )
    with agent:
        agent.run_conversation(user_message="go")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (dirs["work"] / "inside.txt").exists():
            time.sleep(0.05)
    assert (dirs["work"] / "inside.txt").exists() and not target.exists()


def _sleepers(token: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as stat:
                zombie = stat.read().rsplit(")", 1)[1].split()[0] == "Z"
        except (OSError, IndexError):
            continue
        if argv[:2] == [b"sleep", token.encode()] and not zombie:
            found.append(int(entry))
    return found


def test_an_interrupt_kills_every_process_inside_the_sandbox(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    token = f"{30 + os.getpid() % 1000 / 1000:.3f}"
    provider.add(calls(("terminal", {"command": f"sleep {token} & sleep {token} & wait"})))
    provider.add(text("next"))
    with make_agent(provider, dirs, config={"approvals.mode": "off"}) as agent:
        deadline = time.monotonic() + 10
        threading.Thread(target=_interrupt_when_running, args=(agent, token), daemon=True).start()
        result = agent.run_conversation(user_message="sleep")
        assert result["interrupted"]
        while time.monotonic() < deadline and _sleepers(token):
            time.sleep(0.05)
        assert _sleepers(token) == []


def _interrupt_when_running(agent: Agent, token: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(_sleepers(token)) < 2:
        time.sleep(0.05)
    agent.interrupt()
