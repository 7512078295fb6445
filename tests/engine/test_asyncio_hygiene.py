"""asyncio hygiene: running twice, dropping an agent, interrupting parallel tools and failing print
no asyncio noise; an error names its own cause only."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import scripted_agent
from talaria.testing import Fail, ScriptedProvider

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
    script = "import gc, sys\n" + f"sys.path.insert(0, {str(Path(__file__).parents[1])!r})\n"
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

        long_nap = threading.Event()

        @tool
        def nap(seconds: float) -> str:
            \"\"\"Sleep.

            Args:
                seconds: how long
            \"\"\"
            if seconds > 1:
                long_nap.set()
            time.sleep(seconds)
            return "rested"

        def interrupt_during_the_long_nap():
            long_nap.wait(300)
            agent.interrupt()

        steps = [calls(("nap", {{"seconds": 0.3}}), ("nap", {{"seconds": 30}})), text("x")]
        with ScriptedProvider(steps) as server:
            with scripted_agent(server, {str(tmp_path)!r}, tools=[nap]) as agent:
                threading.Thread(target=interrupt_during_the_long_nap, daemon=True).start()
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
