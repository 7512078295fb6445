"""One writer per session: two agents on one session, in two processes or in one, lose none of each
other's turns."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import scripted_agent
from talaria import Agent
from talaria.messages.validate import history_problems
from talaria.store.sqlite import SQLiteSessionStore
from talaria.testing import ScriptedProvider, text
from talaria.testing.script import Reply

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _integrity(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


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
