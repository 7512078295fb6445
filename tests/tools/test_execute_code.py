"""execute_code: a program the model writes calls the agent's tools, inside bubblewrap, and
each inner call is a call of its own: judged by the same approval policy, seen by the front
end as a tool call, and able to do no more than a direct call could."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import outside_tmp, tool_results
from talaria import Agent
from talaria.events import ApprovalRequested, ToolStarted
from talaria.testing import ScriptedProvider, calls, text
from talaria.tools.sandbox_probe import sandbox_support

pytestmark = [pytest.mark.bwrap, pytest.mark.timeout(120)]

if not sandbox_support().available:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI needs bubblewrap for the sandbox tests: {sandbox_support().detail}")
    pytest.skip(sandbox_support().detail, allow_module_level=True)

NOTES = [f"note{i}.txt" for i in range(15)]
SECRETS = [f"svc{i}.env" for i in range(5)]
"""`.env` files hold secrets: reading one asks the user, from a program as directly."""


@pytest.fixture
def dirs() -> Iterator[dict[str, Path]]:
    base = outside_tmp()
    names = {"work": base / "work", "outside": base / "outside", "home": base / "th"}
    for path in names.values():
        path.mkdir()
    yield names
    shutil.rmtree(base)


class Front:
    """The front end: sees every event, answers approvals: yes to running a program (the
    policy asks about every one, as about `python3 -c`), yes for the reads in `allow`."""

    def __init__(self, allow: tuple[str, ...] = ()) -> None:
        self.allow = allow
        self.asked: list[ApprovalRequested] = []
        self.started: list[ToolStarted] = []

    def approve(self, request: Any) -> str:
        self.asked.append(request)
        if request.tool_name == "execute_code":
            return "once"
        return "once" if any(name in request.command for name in self.allow) else "deny"

    def event(self, event: Any) -> None:
        if isinstance(event, ToolStarted):
            self.started.append(event)


def turn(
    server: ScriptedProvider, dirs: dict[str, Path], front: Front, *steps: tuple[str, dict]
) -> list[str]:
    for name, arguments in steps:
        server.add(calls((name, arguments)))
    server.add(text("done"))
    agent = Agent(
        model="scripted-model",
        base_url=server.openai_base_url,
        api_key="test-key",
        home=dirs["home"],
        cwd=dirs["work"],
        toolsets=["code", "file", "terminal"],
        config={"context.engine": "none", "sandbox.mode": "workspace-write"},
        approval_callback=front.approve,
        event_callback=front.event,
    )
    with agent:
        return tool_results(agent.run_conversation(user_message="go"))


LOOP = """
from talaria_tools import ToolCallError, read_file
for name in NAMES:
    try:
        print("read", name, read_file(name).split("|", 1)[1].strip())
    except ToolCallError as refused:
        print("refused", name, "-", refused)
"""


def test_twenty_inner_reads_each_judged_like_a_direct_read(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    for name in NOTES + SECRETS:
        (dirs["work"] / name).write_text(f"{name} body\n")
    front = Front(allow=("svc0", "svc2", "svc4"))
    program = LOOP.replace("NAMES", repr(NOTES + SECRETS))
    (result,) = turn(provider, dirs, front, ("execute_code", {"code": program}))

    lines = result.splitlines()
    assert lines[0] == "[20 tool calls]"
    for name in [*NOTES, "svc0.env", "svc2.env", "svc4.env"]:
        assert f"read {name} {name} body" in lines
    for name in ("svc1.env", "svc3.env"):
        refusal = f"refused {name} - Denied by the user: 'read {dirs['work'] / name}'"
        assert any(line.startswith(refusal) for line in lines), result
    assert "exit code: 0" in lines
    # the program was shown first, as `python3 -c` would be; then exactly the five secrets
    program_asked, *reads = front.asked
    assert program_asked.tool_name == "execute_code"
    assert program_asked.command.startswith("python3 -c ")
    assert [request.command for request in reads] == [
        f"read {dirs['work'] / name}" for name in SECRETS
    ]
    assert [request.tool_name for request in reads] == ["read_file"] * 5
    # the front end saw the program and each of its calls, as calls of their own
    outer, *inner = front.started
    assert outer.name == "execute_code" and len(inner) == 20
    assert {event.name for event in inner} == {"read_file"}
    assert [event.arguments for event in inner] == [{"path": n} for n in NOTES + SECRETS]
    assert [event.call_id for event in inner] == [f"{outer.call_id}.{i}" for i in range(1, 21)]
    assert len(provider.requests) == 2  # one model call for the program, one for the answer


def test_a_dangerous_inner_command_is_asked_like_a_direct_one(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    target = dirs["outside"] / "escaped.txt"
    escalate = {"command": f"echo hi > {target}", "escalate": True, "justification": "needed"}
    program = (
        "from talaria_tools import terminal, ToolCallError\n"
        "try:\n"
        f"    terminal(**{escalate!r})\n"
        "except ToolCallError as refused:\n"
        "    print('refused:', refused)\n"
    )
    front = Front()
    direct, inner = turn(
        provider, dirs, front, ("terminal", escalate), ("execute_code", {"code": program})
    )
    assert direct.startswith("Denied by the user")
    assert f"refused: {direct}" in inner
    first, _program, second = front.asked
    assert (second.tool_name, second.command, second.reason) == (
        first.tool_name,
        first.command,
        first.reason,
    )
    assert not target.exists()


def test_the_program_itself_is_sandboxed_like_a_command(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    outside = dirs["outside"] / "direct.txt"
    program = (
        "from pathlib import Path\n"
        "Path('inside.txt').write_text('ok')\n"
        "try:\n"
        f"    Path({str(outside)!r}).write_text('escaped')\n"
        "except OSError as exc:\n"
        "    print('blocked:', exc.strerror)\n"
        "import socket\n"
        "try:\n"
        "    socket.socket(socket.AF_UNIX).connect('/run/anything.sock')\n"
        "except OSError as exc:\n"
        "    print('no unix socket:', exc.errno)\n"
    )
    (result,) = turn(provider, dirs, Front(), ("execute_code", {"code": program}))
    assert "blocked: Read-only file system" in result
    assert "no unix socket" in result
    assert (dirs["work"] / "inside.txt").read_text() == "ok" and not outside.exists()


def test_limits_output_calls_and_no_recursion(
    provider: ScriptedProvider, dirs: dict[str, Path]
) -> None:
    (dirs["work"] / "a.txt").write_text("a\n")
    many = (
        "from talaria_tools import read_file, ToolCallError\n"
        "try:\n    from talaria_tools import execute_code\n"
        "except ImportError:\n    print('no execute_code inside')\n"
        "done = 0\n"
        "try:\n"
        "    for _ in range(150):\n        read_file('a.txt'); done += 1\n"
        "except ToolCallError as e:\n    print(done, e)\n"
        "print('x' * 100000)\n"
    )
    (result,) = turn(provider, dirs, Front(), ("execute_code", {"code": many}))
    assert "no execute_code inside" in result
    assert "100 the program made more than 100 tool calls" in result
    assert "[... output cut ...]" in result and len(result) < 21_000
    slow = {"code": "import time\ntime.sleep(60)", "timeout": 1}
    (timed_out,) = turn(provider, dirs, Front(), ("execute_code", slow))
    assert "timed out after 1 s" in timed_out
