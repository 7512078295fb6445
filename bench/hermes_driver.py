"""The reference side of each bench; runs inside bench/.venv-hermes (hermes-agent 0.19.0).

Usage: python hermes_driver.py <command> '<json params>'; prints one JSON line. It imports
nothing from talaria (different venv). HERMES_HOME and the working directory point at a fresh
temporary directory so the user's own ~/.hermes never leaks into a measurement.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import driver_kit
from common import NOOP_SCHEMA, loop_message, search_corpus, search_queries

NAP_SCHEMA = {
    "name": "nap",
    "description": "Sleep for a while.",
    "parameters": {"type": "object", "properties": {"seconds": {"type": "number"}}},
}


def _register_tools() -> None:
    """The bench's tools, as a user would add them: a `bench` toolset in the registry."""
    from tools.registry import registry

    def nap(args: dict[str, Any], **_: Any) -> str:
        time.sleep(float(args.get("seconds", 0.5)))
        return "rested"

    registry.register(
        name="noop", toolset="bench", schema=NOOP_SCHEMA, handler=lambda args, **_: "ok"
    )
    registry.register(name="nap", toolset="bench", schema=NAP_SCHEMA, handler=nap)


def _agent(url: str) -> Any:
    from run_agent import AIAgent

    return AIAgent(
        base_url=url,
        api_key="x",
        model="scripted-model",
        enabled_toolsets=["bench"],
        quiet_mode=True,
        max_iterations=driver_kit.MAX_STEPS,
    )


class _Side:
    """Fresh agents, one per turn; `keep` leaves them alive (idle) after their turn."""

    def __init__(self, url: str, keep: bool) -> None:
        self.url, self.keep = url, keep
        self.alive: list[Any] = []

    def turn(self, message: str) -> int:
        agent = _agent(self.url)
        result = agent.run_conversation(message)
        if self.keep:
            self.alive.append(agent)
        if result.get("final_response") != "done":
            raise RuntimeError(f"final answer {result.get('final_response')!r}")
        return int(result.get("api_calls") or 0)


def cmd_loop(params: dict[str, Any]) -> dict[str, Any]:
    """Also counts the messages the agents stored in the reference's session database, so the
    notes show whether its figures include persistence as talaria's do."""
    _register_tools()
    turns = driver_kit.timed_turns(
        _Side(params["url"], keep=False).turn, int(params["reps"]), params["lengths"]
    )
    return {"turns": turns, "stored_messages": _stored_messages(Path(params["home"]))}


def cmd_sessions(params: dict[str, Any]) -> dict[str, Any]:
    """N sessions at once, one thread each (as its gateway serves several chats)."""
    _register_tools()
    side = _Side(params["url"], keep=True)
    return driver_kit.sessions(
        side.turn,
        driver_kit.on_threads(side.turn),
        int(params["sessions"]),
        int(params["steps"]),
        int(params["sequential"]),
    )


def _stored_messages(home: Path) -> int:
    import sqlite3

    path = home / "state.db"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        if "messages" not in tables:
            return 0
        return int(conn.execute("SELECT count(*) FROM messages").fetchone()[0])


def cmd_parallel(params: dict[str, Any]) -> dict[str, Any]:
    """Turns after a warm-up turn on one agent (setup excluded). `parallel_safe` adds `nap` to
    the reference's read-only set: its best case. Without it the reference runs unknown tools
    one by one, sleeping `tool_delay` (1 s) between them."""
    if params.get("parallel_safe"):
        import agent.tool_dispatch_helpers as helpers

        helpers._PARALLEL_SAFE_TOOLS = helpers._PARALLEL_SAFE_TOOLS | {"nap"}
    _register_tools()
    agent = _agent(params["url"])
    agent.run_conversation("warm up")
    turns = []
    for _ in range(int(params["reps"])):
        start = time.perf_counter()
        result = agent.run_conversation("go")
        turns.append(
            {
                "steps": None,
                "seconds": time.perf_counter() - start,
                "api_calls": result.get("api_calls"),
                "final": result.get("final_response"),
            }
        )
    return {"turns": turns}


def _append(db: Any, session_id: str, message: dict[str, Any]) -> None:
    db.append_message(
        session_id,
        message["role"],
        content=message.get("content"),
        tool_calls=message.get("tool_calls"),
        tool_call_id=message.get("tool_call_id"),
    )


def cmd_persistence(params: dict[str, Any]) -> dict[str, Any]:
    """Median seconds of one `append_message` into a session already holding N messages."""
    from hermes_state import SessionDB

    db = SessionDB(db_path=Path(params["home"]) / "persist.db")
    per_size = {}
    for size in params["sizes"]:
        session_id = f"s{size}"
        db.create_session(session_id, source="cli", model="scripted-model")
        for i in range(size):
            _append(db, session_id, loop_message(i))
        samples = []
        for j in range(int(params["appends"])):
            message = loop_message(size + j)
            start = time.perf_counter()
            _append(db, session_id, message)
            samples.append(time.perf_counter() - start)
        samples.sort()
        per_size[str(size)] = samples[len(samples) // 2]
    db.close()
    return {"per_append": per_size}


def cmd_search(params: dict[str, Any]) -> dict[str, Any]:
    """Load the same corpus as the talaria side (through its bulk `import_sessions`, 100
    sessions a call), then time `search_messages`."""
    from hermes_state import SessionDB

    db = SessionDB(db_path=Path(params["home"]) / "search.db")
    start = time.perf_counter()
    batch: list[dict[str, Any]] = []
    corpus = search_corpus(int(params["sessions"]), int(params["per_session"]))
    for index, messages in enumerate(corpus):
        batch.append({"id": f"s{index}", "source": "cli", "messages": messages})
        if len(batch) == 100:
            db.import_sessions(batch)
            batch = []
    if batch:
        db.import_sessions(batch)
    fill = time.perf_counter() - start
    queries = search_queries(int(params["queries"]))
    for query in queries:  # one untimed pass: every side is timed with a warm page cache
        db.search_messages(query, limit=10)
    samples = []
    hits = 0
    for query in queries:
        start = time.perf_counter()
        found = db.search_messages(query, limit=10)
        samples.append(time.perf_counter() - start)
        hits += bool(found)
    stored = db.message_count()
    db.close()
    return {"samples": samples, "fill_seconds": fill, "queries_with_hits": hits, "messages": stored}


HERMES_WINDOW = 65536
"""The smallest window the reference accepts (bench/tasks.py)."""


def cmd_task(params: dict[str, Any]) -> dict[str, Any]:
    """One coding task (bench/tasks.py) with the reference's own file and terminal tools, in
    the task's working directory (its tools resolve paths against TERMINAL_CWD)."""
    from run_agent import AIAgent

    # It refuses windows under 64K; its own error tells a user with a smaller local server to
    # state the window in config.yaml. The tasks stay far below the server's real window.
    Path(params["home"], "config.yaml").write_text(f"model:\n  context_length: {HERMES_WINDOW}\n")
    os.environ["TERMINAL_CWD"] = params["workspace"]
    os.chdir(params["workspace"])
    agent = AIAgent(
        base_url=params["url"],
        api_key="x",
        model=params["model"],
        enabled_toolsets=["file", "terminal"],
        quiet_mode=True,
        max_iterations=int(params["max_steps"]),
    )
    started = time.monotonic()
    result = agent.run_conversation(params["prompt"])
    return {
        "seconds": time.monotonic() - started,
        "steps": int(result.get("api_calls") or 0),
        "answer": result.get("final_response") or "",
        "error": result.get("error") if result.get("failed") else None,
    }


COMMANDS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "task": cmd_task,
    "loop": cmd_loop,
    "sessions": cmd_sessions,
    "parallel": cmd_parallel,
    "persistence": cmd_persistence,
    "search": cmd_search,
}


def main() -> None:
    command, params = sys.argv[1], json.loads(sys.argv[2])
    with tempfile.TemporaryDirectory(prefix="bench-hermes-", ignore_cleanup_errors=True) as home:
        params["home"] = home
        os.environ["HERMES_HOME"] = home
        os.chdir(home)
        answer = COMMANDS[command](params)
        os.chdir(tempfile.gettempdir())
    sys.stdout.write("\n" + json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
