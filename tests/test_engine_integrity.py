"""What the engine guarantees around the loop: one writer per session, text that cannot wedge a
session, children under the parent's guards, grants that mean what the user saw, a loop guard
that sees results, and an atomic compression hand-over."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import yaml

from helpers import scripted_agent, tool_results
from talaria import Agent
from talaria.messages.validate import history_problems
from talaria.store.sqlite import SQLiteSessionStore
from talaria.testing import ScriptedModel, ScriptedProvider, call, calls, text
from talaria.testing.script import Reply

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _integrity(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


# ---- one writer per session -------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import json, sys
    from talaria import Agent
    base_url, home, name = sys.argv[1:4]
    outcomes = []
    with Agent(model="scripted-model", base_url=base_url, api_key="k", home=home, cwd=home,
               session_id="shared", toolsets=[], config={"context.engine": "none"}) as agent:
        for n in range(20):
            result = agent.run_conversation(user_message=f"{name} turn {n}")
            outcomes.append(result["turn_exit_reason"])
    print(json.dumps(outcomes))
    """
)


def test_two_processes_on_one_session_lose_nothing(tmp_path: Path) -> None:
    server = ScriptedProvider([Reply(text=f"answer {n}", delay=0.02) for n in range(40)])
    with server:
        Agent(home=tmp_path, model="m", base_url=server.openai_base_url).store.create_session(
            "shared"
        )
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, server.openai_base_url, str(tmp_path), name],
                stdout=subprocess.PIPE,
                text=True,
                env=_env(),
            )
            for name in ("A", "B")
        ]
        outcomes = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
        invalid = server.invalid_requests
    done = [o for run in outcomes for o in run if o == "text_response"]
    busy = [o for run in outcomes for o in run if o == "failed:session_busy"]
    assert len(done) + len(busy) == 40, outcomes
    with SQLiteSessionStore(tmp_path / "state.db") as store:
        stored = store.load_messages("shared")
    assert len(stored) == 2 * len(done), "every completed turn is stored, nothing else"
    assert [m["role"] for m in stored] == ["user", "assistant"] * len(done)
    assert history_problems(stored) == []
    assert invalid == [], "every request either process sent had a valid history"
    assert _integrity(tmp_path / "state.db") == "ok"


def test_a_second_agent_in_the_same_process_sees_the_firsts_turns(tmp_path: Path) -> None:
    server = ScriptedProvider([text("one"), text("two")])
    with server:
        first = scripted_agent(server, tmp_path, session_id="s")
        second = scripted_agent(server, tmp_path, session_id="s")
        first.chat("from first")
        second.chat("from second")
        history = second.messages
        first.close()
        second.close()
    assert [m["content"] for m in history] == ["from first", "one", "from second", "two"]


# ---- text integrity ---------------------------------------------------------------------------


def test_lone_surrogates_in_text_arguments_and_file_names_leave_the_session_working(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / os.fsdecode(b"bad\xffname.txt")).write_text("needle\n")
    server = ScriptedProvider(
        [
            text("broken \ud83d text"),
            calls(("add", {"a": 1, "b": 2}), ("search_files", {"pattern": "needle"})),
            call("write_file", {"path": "note\udc80.txt", "content": "x\ud800y"}),
            text("still fine"),
        ]
    )
    server.start()
    agent = Agent(
        model="scripted-model",
        base_url=server.openai_base_url,
        api_key="k",
        home=tmp_path / "home",
        cwd=work,
        tools=[_add_tool()],
        toolsets=["file"],
        config={"context.engine": "none"},
    )
    with server, agent:
        first = agent.run_conversation(user_message="say \udcff something")
        second = agent.run_conversation(user_message="search")
        stored = agent.store.load_messages(agent.session_id or "")
    assert first["completed"] and second["completed"], second.get("error")
    assert second["final_response"] == "still fine"
    assert "broken \ufffd text" in json.dumps(stored, ensure_ascii=False)
    assert any("bad\ufffdname.txt" in r for r in tool_results(second))
    assert server.invalid_requests == []
    assert len(stored) == len(second["messages"])


def test_a_tool_that_raises_megabytes_stores_a_capped_error(tmp_path: Path) -> None:
    from talaria import tool

    @tool
    def explode() -> str:
        """Fail loudly."""
        raise RuntimeError("x" * 5_000_000)

    server = ScriptedProvider([call("explode", {}), text("ok")])
    with server, scripted_agent(server, tmp_path, tools=[explode]) as agent:
        result = agent.run_conversation(user_message="go")
    (error,) = tool_results(result)
    assert error.startswith("Error: explode failed") and len(error) < 100_000
    assert len(json.dumps(server.requests[-1].body)) < 200_000


# ---- delegation -------------------------------------------------------------------------------


def test_a_childs_terminal_call_reaches_the_parents_guard(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    class Guard:
        def register(self, hooks: Any) -> None:
            hooks.register("pre_tool_call", self.guard)

        def guard(self, tool_name: str, arguments: dict[str, Any], **kwargs: Any) -> Any:
            seen.append((tool_name, kwargs.get("session_id", "")))
            if tool_name == "terminal":
                return {"block": "no shell for children"}
            return None

    model = ScriptedModel(
        [
            call("delegate_task", {"goal": "list files"}),
            call("terminal", {"command": "ls"}),
            text("child done"),
            text("parent done"),
        ]
    )
    with Agent(
        model=model,
        home=tmp_path,
        cwd=tmp_path,
        plugins=[Guard()],
        toolsets=["delegation", "terminal"],
        config={"context.engine": "none", "delegation.max_concurrent_children": 1},
    ) as agent:
        result = agent.run_conversation(user_message="delegate")
    assert result["final_response"] == "parent done"
    assert ("terminal", seen[-1][1]) in seen and seen[0][0] == "delegate_task"
    child_results = [m["content"] for m in model.requests[2].messages if m.get("role") == "tool"]
    assert child_results == ["Blocked by a plugin: no shell for children"]


# ---- grants -----------------------------------------------------------------------------------


def test_two_always_grants_from_two_agents_both_survive_a_restart(tmp_path: Path) -> None:
    one, two, other = tmp_path / "one", tmp_path / "two", tmp_path / "other"
    server = ScriptedProvider()
    for target in (one, two):
        server.add(calls(("terminal", {"command": f"rm -rf {target}"})), text("ok"))
    with server:
        agents = [
            scripted_agent(
                server,
                tmp_path,
                toolsets=["terminal"],
                tools=[],
                approval_callback=lambda r: "always",
            )
            for _ in range(2)
        ]
        for agent in agents:
            agent.warm_up()
        for agent, message in zip(agents, ("one", "two"), strict=True):
            agent.chat(message)
        for agent in agents:
            agent.close()
        saved = yaml.safe_load((tmp_path / "config.yaml").read_text())["command_allowlist"]
        assert saved == [f"rm -rf {one}", f"rm -rf {two}"]
        for target in (one, two, other):
            target.mkdir()
            server.add(calls(("terminal", {"command": f"rm -rf {target}"})), text("done"))
        with scripted_agent(server, tmp_path, toolsets=["terminal"], tools=[]) as headless:
            for message in ("one", "two", "other"):
                headless.chat(message)
    assert not one.exists() and not two.exists()
    assert other.exists(), "a grant never approves a different path"


def test_a_session_grant_ends_with_the_session(tmp_path: Path) -> None:
    target = tmp_path / "t"
    asked: list[str] = []

    def approve(request: Any) -> str:
        asked.append(request.command)
        return "session"

    server = ScriptedProvider()
    for _ in range(3):
        server.add(calls(("terminal", {"command": f"rm -rf {target}"})), text("ok"))
    with (
        server,
        scripted_agent(
            server, tmp_path, toolsets=["terminal"], tools=[], approval_callback=approve
        ) as agent,
    ):
        agent.chat("a")
        agent.chat("b")
        agent.new_session()
        agent.chat("c")
    assert len(asked) == 2, "asked once per session"


# ---- the loop guard sees results --------------------------------------------------------------


def test_ten_polls_of_a_process_whose_output_changes_all_run(tmp_path: Path) -> None:
    def poll(body: dict[str, Any]) -> Reply:
        started = next(m for m in body["messages"] if m.get("role") == "tool")["content"]
        process_id = re.search(r"background as (\S+)", started).group(1)  # type: ignore[union-attr]
        return Reply(
            tool_calls=call("process", {"action": "poll", "id": process_id}).tool_calls,
            delay=0.3,
        )

    command = "for i in $(seq 1 100); do echo line $i; sleep 0.1; done"
    server = ScriptedProvider(
        [call("terminal", {"command": command, "background": True}), *[poll] * 10, text("built")]
    )
    with (
        server,
        scripted_agent(
            server, tmp_path, toolsets=["terminal"], tools=[], config={"approvals.mode": "off"}
        ) as agent,
    ):
        result = agent.run_conversation(user_message="build and watch")
    polls = tool_results(result)[1:]
    assert result["turn_exit_reason"] == "text_response"
    assert len(polls) == 10 and all("recent output" in p for p in polls)
    assert len(set(polls)) == 10


# ---- compression hand-over --------------------------------------------------------------------

HANDOVER = textwrap.dedent(
    """
    import os, signal, sys
    from talaria.store.sqlite import SQLiteSessionStore
    db, step = sys.argv[1], int(sys.argv[2])

    class Dying(SQLiteSessionStore):
        count = 0
        def _tick(self):
            Dying.count += 1
            if Dying.count == step:
                os.kill(os.getpid(), signal.SIGKILL)
        def create_session(self, *a, **k): super().create_session(*a, **k); self._tick()
        def update_session(self, *a, **k): super().update_session(*a, **k); self._tick()
        def rename(self, *a, **k): super().rename(*a, **k); self._tick()
        def set_state(self, *a, **k): super().set_state(*a, **k); self._tick()
        def release_writer(self, *a, **k): super().release_writer(*a, **k); self._tick()
        def claim_writer(self, *a, **k): super().claim_writer(*a, **k); self._tick()
        def append_messages(self, *a, **k): super().append_messages(*a, **k); self._tick()

    store = Dying(db)
    store.claim_writer("parent", "w")
    Dying.count = 0
    summary = [{"role": "user", "content": "summary"}, {"role": "assistant", "content": "ok"}]
    store.continue_in_child("parent", "child", summary, state={"todos": [1]}, writer="w")
    store._tick()
    print("finished")
    """
)


def test_a_kill_at_any_step_of_the_hand_over_leaves_one_live_titled_session(
    tmp_path: Path,
) -> None:
    for step in range(1, 12):
        db = tmp_path / f"state{step}.db"
        with SQLiteSessionStore(db) as store:
            store.create_session("parent")
            store.append_messages("parent", [(0, {"role": "user", "content": "hi"})])
            store.rename("parent", "my work")
        run = subprocess.run(
            [sys.executable, "-c", HANDOVER, str(db), str(step)],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=60,
        )
        with SQLiteSessionStore(db) as store:
            live = store.resolve("my work")
            info = store.get_session(live)
            child = store.get_session("child")
            messages = store.load_messages(live)
        assert _integrity(db) == "ok"
        if live == "parent":
            assert child is None, f"step {step}: a half-made child"
            assert info is not None and not info.ended_at
            assert [m["content"] for m in messages] == ["hi"]
        else:
            assert live == "child" and child is not None
            assert store_is_complete(messages, child)
        if "finished" in run.stdout:
            break
    assert "finished" in run.stdout, "the hand-over ran to completion in the last round"


def store_is_complete(messages: list[dict[str, Any]], child: Any) -> bool:
    return [m["content"] for m in messages] == ["summary", "ok"] and child.parent_session_id == (
        "parent"
    )


def test_concurrent_turns_on_one_loop_progress_while_a_hook_sleeps(tmp_path: Path) -> None:
    import asyncio

    slow_started = threading.Event()

    class SlowGuard:
        def register(self, hooks: Any) -> None:
            hooks.register("pre_tool_call", self.guard)

        def guard(self, **kwargs: Any) -> None:
            slow_started.set()
            threading.Event().wait(1.5)

    finished: list[str] = []

    async def main() -> None:
        slow = Agent(
            model=ScriptedModel([call("add", {"a": 1, "b": 1}), text("slow done")]),
            home=tmp_path / "slow",
            tools=[_add_tool()],
            toolsets=[],
            plugins=[SlowGuard()],
            config={"context.engine": "none"},
        )
        fast = [
            Agent(
                model=ScriptedModel([call("add", {"a": n, "b": 1}), text(f"fast {n}")]),
                home=tmp_path / f"fast{n}",
                tools=[_add_tool()],
                toolsets=[],
                config={"context.engine": "none"},
            )
            for n in range(5)
        ]

        async def run(agent: Agent, label: str) -> None:
            await agent.achat(label)
            finished.append(label)
            await agent.aclose()

        slow_task = asyncio.create_task(run(slow, "slow"))
        await asyncio.to_thread(slow_started.wait, 10)
        await asyncio.gather(*(run(agent, f"fast{n}") for n, agent in enumerate(fast)))
        await slow_task

    asyncio.run(main())
    assert finished[-1] == "slow" and len(finished) == 6


def _add_tool() -> Any:
    from helpers import add

    return add
