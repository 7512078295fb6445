"""Agents share a few bounded threads per process: none of their own, and a hung tool starves
nobody (not the other agents' tools, not anyone's store writes)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import add
from talaria import Agent, tool
from talaria.loop.turn import ABANDONED_RESULT
from talaria.offload import IO_WORKERS, USER_WORKERS, lane
from talaria.testing import ScriptedModel, call, text


class Gate:
    """Where `wait_at_gate` calls block; `entered` counts the calls that reached it."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.entered = threading.Semaphore(0)


gate = Gate()


@tool
def wait_at_gate(n: int) -> str:
    """Block until the test opens the gate.

    Args:
        n: which call this is
    """
    here = gate
    here.entered.release()
    here.open.wait(30)
    return f"through {n}"


def _agent(home: Path, *steps: Any, **config: Any) -> Agent:
    return Agent(
        model=ScriptedModel(list(steps)),
        home=home,
        tools=[wait_at_gate, add],
        toolsets=[],
        config={"context.engine": "none", **config},
    )


def _lane_threads() -> int:
    """Threads of the shared lanes (other parts, an MCP server's loop say, name theirs too)."""
    return sum(t.name.startswith(("talaria-io-", "talaria-user-")) for t in threading.enumerate())


def test_tools_that_never_return_do_not_stop_other_agents(tmp_path: Path) -> None:
    """More hung sync tools than the user lane has workers: each times out, its thread is
    abandoned and replaced, and another agent's tool still runs."""
    global gate
    gate = Gate()
    hung = USER_WORKERS + 2

    async def main() -> tuple[list[str], str]:
        stuck = [
            _agent(tmp_path / f"h{n}", call("wait_at_gate", {"n": n}), text("gave up"),
                   **{"agent.tool_timeout": 0.5})
            for n in range(hung)
        ]  # fmt: skip
        results = await asyncio.gather(*(a.arun_conversation(user_message="wait") for a in stuck))
        other = _agent(tmp_path / "other", call("add", {"a": 2, "b": 2}), text("four"))
        after = await other.arun_conversation(user_message="add")
        for agent in [*stuck, other]:
            await agent.aclose()
        timed_out = [m["content"] for r in results for m in r["messages"] if m["role"] == "tool"]
        added = next(m["content"] for m in after["messages"] if m["role"] == "tool")
        return timed_out, added

    try:
        timed_out, added = asyncio.run(main())
    finally:
        gate.open.set()
    assert timed_out == ["Error: wait_at_gate timed out after 0.5 s."] * hung
    assert added == "4"


def test_store_writes_go_on_while_every_tool_worker_is_busy(tmp_path: Path) -> None:
    global gate
    gate = Gate()

    async def main() -> str:
        busy = [
            _agent(tmp_path / f"b{n}", call("wait_at_gate", {"n": n}), text("done"))
            for n in range(USER_WORKERS)
        ]
        tasks = [asyncio.create_task(a.arun_conversation(user_message="wait")) for a in busy]
        for _ in range(USER_WORKERS):  # every user-lane worker is inside a tool now
            assert await asyncio.to_thread(gate.entered.acquire, True, 10)
        talker = _agent(tmp_path / "talker", text("saved while the tools wait"))
        answer = await talker.achat("hello")
        stored = talker.store.load_messages(talker.session_id or "")
        assert [m["role"] for m in stored] == ["user", "assistant"]
        gate.open.set()
        for result in await asyncio.gather(*tasks):
            assert result["final_response"] == "done"
        for agent in [*busy, talker]:
            await agent.aclose()
        return answer

    try:
        assert asyncio.run(main()) == "saved while the tools wait"
    finally:
        gate.open.set()


def test_many_agents_run_on_a_few_shared_threads(tmp_path: Path) -> None:
    agents = 40
    peak = 0

    async def main() -> None:
        nonlocal peak
        crowd = [
            _agent(tmp_path / f"c{n}", call("add", {"a": n, "b": 1}), text(f"{n}"))
            for n in range(agents)
        ]

        async def watch() -> None:
            nonlocal peak
            while True:
                peak = max(peak, _lane_threads())
                await asyncio.sleep(0.005)

        watcher = asyncio.create_task(watch())
        results = await asyncio.gather(*(a.arun_conversation(user_message="go") for a in crowd))
        watcher.cancel()
        assert [r["final_response"] for r in results] == [str(n) for n in range(agents)]
        for agent in crowd:
            await agent.aclose()

    asyncio.run(main())
    assert 0 < peak <= IO_WORKERS + USER_WORKERS, f"{peak} lane threads for {agents} agents"
    assert lane("user").workers <= USER_WORKERS


def test_sync_chat_keeps_no_loop_or_thread_per_agent(tmp_path: Path) -> None:
    loops_before = _loops_alive()
    crowd = [
        _agent(tmp_path / f"s{n}", call("add", {"a": n, "b": 1}), text("ok")) for n in range(12)
    ]
    try:
        assert [agent.chat("go") for agent in crowd] == ["ok"] * 12
        assert _loops_alive() - loops_before <= 1, "an event loop per agent"
        assert _lane_threads() <= IO_WORKERS + USER_WORKERS
        assert sum(t.name == "talaria-loop" for t in threading.enumerate()) == 1
    finally:
        for agent in crowd:
            agent.close()


def _loops_alive() -> int:
    gc.collect()
    return sum(isinstance(o, asyncio.AbstractEventLoop) for o in gc.get_objects())


def test_ctrl_c_during_a_sync_turn_stops_that_turn(tmp_path: Path) -> None:
    """A KeyboardInterrupt while `chat()` waits cancels the turn on the shared loop: it closes
    its step (the running call gets a result) and saves it, instead of running on unseen."""
    agent = _agent(tmp_path, call("wait_at_gate", {"n": 1}), text("next answer"))
    main = threading.main_thread().ident
    assert main is not None
    with _interrupted_at_the_gate(main):
        with pytest.raises(KeyboardInterrupt):
            agent.chat("wait for it")
        assert agent.chat("are you there?") == "next answer"
        stored = agent.store.load_messages(agent.session_id or "")
    agent.close()
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "user", "assistant"]
    assert stored[2]["content"] == ABANDONED_RESULT


def test_ctrl_c_handed_to_another_thread_still_stops_the_turn(tmp_path: Path) -> None:
    """The kernel may hand the process's SIGINT to any of its threads (the loop's, a worker's);
    `chat()`'s wait still sees it while the turn runs, not once the turn is over."""
    agent = _agent(tmp_path, call("wait_at_gate", {"n": 1}), text("next answer"))
    from talaria.background import shared_loop

    shared_loop()
    loop_thread = next(t for t in threading.enumerate() if t.name == "talaria-loop")
    assert loop_thread.ident is not None
    with _interrupted_at_the_gate(loop_thread.ident):
        with pytest.raises(KeyboardInterrupt):
            agent.chat("wait for it")
        stored = agent.store.load_messages(agent.session_id or "")
    agent.close()
    assert stored[2]["content"] == ABANDONED_RESULT  # stopped inside the tool, not after it


@contextlib.contextmanager
def _interrupted_at_the_gate(thread_id: int) -> Iterator[None]:
    """SIGINT to `thread_id` once a call waits at a new gate; the gate opens at the end.
    Python raises KeyboardInterrupt only where SIGINT was not ignored at start-up; a runner
    started in the background of a shell (CI's, say) inherits it ignored."""
    global gate
    gate = Gate()

    def interrupt_once_inside() -> None:
        if gate.entered.acquire(timeout=300):
            signal.pthread_kill(thread_id, signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Thread(target=interrupt_once_inside, daemon=True).start()
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        gate.open.set()
