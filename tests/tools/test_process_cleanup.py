"""Nothing left running: processes a command detaches end with the command, and background
processes end at close or when the interpreter exits."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cli_process import SANDBOX_MODES, tagged_processes, wait_for
from helpers import scripted_agent
from talaria.testing import ScriptedProvider, call, text


def _terminal_agent(  # type: ignore[no-untyped-def]
    server: ScriptedProvider, home: Path, sandbox: str = "workspace-write"
):
    config = {"approvals.mode": "off", "sandbox.mode": sandbox}
    return scripted_agent(server, home, tools=[], toolsets=["terminal"], config=config)


def _alive(marker: str) -> bool:
    return any(marker in cmdline for _, cmdline in tagged_processes())


@pytest.mark.parametrize(
    "command",
    [
        "sleep 3031 >/dev/null 2>&1 &",
        "setsid sleep 3031 >/dev/null 2>&1 &",
        "(setsid sh -c 'sleep 3031 &' &) ; sleep 0.2",
        "nohup sleep 3031 >/dev/null 2>&1 &",
    ],
    ids=["redirected", "setsid", "double-fork", "nohup"],
)
@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_detached_children_end_with_the_command(tmp_path: Path, command: str, sandbox: str) -> None:
    steps = [call("terminal", {"command": command}), text("done")]
    with ScriptedProvider(steps) as server, _terminal_agent(server, tmp_path, sandbox) as agent:
        result = agent.run_conversation(user_message="start it")
        assert not _alive("sleep 3031"), tagged_processes()
    assert result["final_response"] == "done"


def test_with_a_cgroup_even_a_child_that_drops_its_environment_ends(tmp_path: Path) -> None:
    from talaria.tools.process_tracking import _cgroup_root

    if _cgroup_root() is None:
        pytest.skip("no writable cgroup v2 here: tags, groups and sessions are used instead")
    command = "sleep 0.2; env -i setsid sleep 3036 >/dev/null 2>&1 &"
    steps = [call("terminal", {"command": command}), text("done")]
    with (
        ScriptedProvider(steps) as server,
        _terminal_agent(server, tmp_path, "full-access") as agent,  # no pid namespace
    ):
        assert agent.chat("start it") == "done"
        leftovers = subprocess.run(["pgrep", "-f", "sleep 3036"], capture_output=True, text=True)
    assert leftovers.stdout == ""


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_background_processes_and_their_detached_children_end_at_close(
    tmp_path: Path, sandbox: str
) -> None:
    command = "setsid sleep 3032 >/dev/null 2>&1 & sleep 3033"
    steps = [call("terminal", {"command": command, "background": True}), text("started")]
    with ScriptedProvider(steps) as server:
        agent = _terminal_agent(server, tmp_path, sandbox)
        assert agent.chat("serve") == "started"
        assert wait_for(lambda: _alive("sleep 3032") and _alive("sleep 3033"), 10)
        agent.close()
    assert wait_for(lambda: not _alive("sleep 303"), 5), tagged_processes()


def test_processes_end_when_the_interpreter_exits_without_close(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parents[1])!r})
        from helpers import scripted_agent
        from talaria.testing import ScriptedProvider, call, text
        steps = [call("terminal", {{"command": "setsid sleep 3034 >/dev/null 2>&1 & sleep 3035",
                                    "background": True}}), text("started")]
        server = ScriptedProvider(steps).start()
        agent = scripted_agent(server, {str(tmp_path)!r}, tools=[], toolsets=["terminal"],
                               config={{"approvals.mode": "off"}})
        print(agent.chat("go"), flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "started", done.stderr
    assert wait_for(lambda: not _alive("sleep 303"), 5), tagged_processes()
