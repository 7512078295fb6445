"""Streams that never end, processes that detach, asyncio noise and hostile terminal text."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hardening_helpers import SANDBOX_MODES
from helpers import MODES, scripted_agent
from talaria import events as ev
from talaria.cli.render import Renderer
from talaria.testing import Endless, Fail, ScriptedProvider, call, text
from test_hardening_signals import tagged_processes, wait_for

# ---- a deadline for every model call -----------------------------------------------------

DEADLINE = {"model.total_timeout": 1.0, "retry.max_attempts": 2, "retry.base_delay": 0.05}


@pytest.mark.parametrize("mode", MODES)
def test_an_endless_stream_ends_within_the_total_timeout(tmp_path: Path, mode: str) -> None:
    steps = [text("warm"), Endless(), Endless()]
    with (
        ScriptedProvider(steps) as server,
        scripted_agent(server, tmp_path, mode, config=DEADLINE) as agent,
    ):
        assert agent.chat("first") == "warm"  # the SDK is imported: only calls are timed
        started = time.monotonic()
        result = agent.run_conversation(user_message="talk")
        took = time.monotonic() - started
    assert result["turn_exit_reason"] == "failed:timeout"
    assert "model.total_timeout" in result["error"]
    assert result["final_response"] is None
    assert len(server.requests) == 3, "a timeout is retried"
    assert 2.0 <= took < 10, f"two calls of at most 1 s each took {took:.1f} s"
    roles = [m["role"] for m in result["messages"]]
    assert roles == ["user", "assistant", "user"], "no partial answer is kept"


def test_an_endless_stream_falls_back_to_the_next_provider(tmp_path: Path) -> None:
    with (
        ScriptedProvider([Endless(), Endless()]) as endless,
        ScriptedProvider([text("from the fallback")]) as good,
    ):
        fallback = {
            "provider": "custom",
            "model": "scripted-model",
            "base_url": good.openai_base_url,
            "api_key": "k",
        }
        agent = scripted_agent(endless, tmp_path, config=DEADLINE, fallback_providers=[fallback])
        with agent:
            result = agent.run_conversation(user_message="talk")
    assert result["final_response"] == "from the fallback"
    assert len(endless.requests) == 2 and len(good.requests) == 1


# ---- nothing left running -----------------------------------------------------------------


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
        sys.path.insert(0, {str(Path(__file__).parent)!r})
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


# ---- asyncio hygiene ------------------------------------------------------------------------

NOISE = (
    "never retrieved",
    "Event loop is closed",
    "was destroyed but it is pending",
    "was never awaited",
    "ResourceWarning",
    "Traceback",
)


def _run_quietly(body: str, tmp_path: Path) -> str:
    """Run a script with every warning shown; its stderr, which must hold none of NOISE."""
    script = "import gc, sys\n" + f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
    script += textwrap.dedent(body)
    done = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TALARIA_HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    for phrase in NOISE:
        assert phrase not in done.stderr, done.stderr
    return done.stdout


def test_asyncio_run_twice_and_an_agent_dropped_without_close_are_silent(tmp_path: Path) -> None:
    out = _run_quietly(
        f"""
        import asyncio
        from helpers import scripted_agent
        from talaria.testing import ScriptedProvider, text
        with ScriptedProvider([text("one"), text("two"), text("three")]) as server:
            agent = scripted_agent(server, {str(tmp_path)!r})
            print(asyncio.run(agent.achat("a")), asyncio.run(agent.achat("b")))
            gc.collect()
            dropped = scripted_agent(server, {str(tmp_path / "other")!r})
            print(dropped.chat("c"))
            del dropped, agent
            gc.collect()
        """,
        tmp_path,
    )
    assert out.split() == ["one", "two", "three"]


def test_interrupting_parallel_tools_is_silent(tmp_path: Path) -> None:
    out = _run_quietly(
        f"""
        import threading, time
        from talaria import tool
        from helpers import scripted_agent
        from talaria.testing import ScriptedProvider, calls, text

        @tool
        def nap(seconds: float) -> str:
            \"\"\"Sleep.

            Args:
                seconds: how long
            \"\"\"
            time.sleep(seconds)
            return "rested"

        steps = [calls(("nap", {{"seconds": 0.3}}), ("nap", {{"seconds": 30}})), text("x")]
        with ScriptedProvider(steps) as server:
            with scripted_agent(server, {str(tmp_path)!r}, tools=[nap]) as agent:
                threading.Timer(1.0, agent.interrupt).start()
                result = agent.run_conversation(user_message="nap")
                gc.collect()
                print(result["turn_exit_reason"])
        """,
        tmp_path,
    )
    assert out.strip() == "interrupted"


def test_errors_carry_their_own_cause_only(tmp_path: Path) -> None:
    steps = [Fail(400, "your request is bad")]
    with ScriptedProvider(steps) as server, scripted_agent(server, tmp_path) as agent:
        result = agent.run_conversation(user_message="hi")
    assert result["failed"]
    assert "your request is bad" in result["error"]
    assert "running event loop" not in result["error"]


# ---- safe rendering -------------------------------------------------------------------------

HOSTILE = (
    "copy \x1b]52;c;cm0gLXJmIH4=\x07this\x1b[2J\x1b[H, retitle \x1b]0;pwned\x1b\\now, "
    "move \x1b[10;10H\x1b[K, 8-bit \x9b2J\x9d0;t\x9c and \x1bc reset\n\n"
)


def test_the_renderer_drops_control_sequences_but_keeps_its_colours(tmp_path: Path) -> None:
    out = io.StringIO()
    renderer = Renderer(out, color=True, cwd=tmp_path)
    renderer.begin_turn()
    for event in (
        ev.TextDelta(HOSTILE),
        ev.ReasoningDelta("think \x1b]2;title\x07 hard\n"),
        ev.ToolStarted("c1", "terminal", {"command": "echo \x1b]52;c;eA==\x07"}),
        ev.ToolFinished("c1", "terminal", "\x1b[2Jerror \x1b]0;t\x07", True, 0.1),
        ev.ToolStarted("c2", "terminal", {"command": "cat notes"}),
        ev.ToolFinished("c2", "terminal", "line \x1b]52;c;eA==\x07 \x1b[31mred\x1b[0m", False, 0.1),
        ev.Notice("warning", "provider said \x1b[2J\x1b]0;x\x07 hello"),
        ev.TurnFinished("text_response", HOSTILE, 1),
    ):
        renderer(event)
    renderer.error("bad \x1b]52;c;eA==\x07 thing")
    shown = out.getvalue()
    forbidden = ("\x1b]", "\x1b[2J", "\x1b[H", "\x1b[K", "\x1b[10;10H", "\x9b", "\x9d", "\x1bc")
    for sequence in (*forbidden, "\x07"):
        assert sequence not in shown, repr(sequence)
    assert "\x1b[" in shown, "the renderer's own colours stay"
    assert "copy" in shown and "this" in shown and "hello" in shown


def test_the_one_shot_answer_on_a_terminal_loses_its_control_sequences(tmp_path: Path) -> None:
    """`talaria -p` streams the answer to a terminal: what reaches it has no OSC / CSI."""
    import pty

    from hardening_helpers import MODEL_ARGS

    primary, secondary = pty.openpty()
    with ScriptedProvider([text(HOSTILE)]) as server:
        done = subprocess.run(
            [sys.executable, "-m", "talaria.cli.main", "-p", "say it", *MODEL_ARGS,
             "--base-url", server.openai_base_url],
            env={**os.environ, "TALARIA_HOME": str(tmp_path)}, stdin=subprocess.DEVNULL,
            stdout=secondary, stderr=subprocess.PIPE, timeout=60,
        )  # fmt: skip
    os.close(secondary)
    shown = b""
    with contextlib.suppress(OSError):
        while chunk := os.read(primary, 65536):
            shown += chunk
    os.close(primary)
    assert done.returncode == 0, done.stderr
    answer = shown.decode("utf-8", "replace")
    assert "copy" in answer and "reset" in answer
    for sequence in ("\x1b", "\x07", "\x9b", "\x9d"):
        assert sequence not in answer, repr(answer)
