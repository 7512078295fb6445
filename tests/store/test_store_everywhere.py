"""One store for every front end: with `store.url` naming PostgreSQL, every command and front
end that reads or writes sessions uses it (and none creates a `state.db` in the home), so a
session one of them starts is listed, shown, resumed and counted by all the others."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from acp.schema import AgentMessageChunk

from acp_editor import Editor, agent_env, connected, talaria_cli
from server_helpers import ServeProcess, read_events
from talaria.config import Config
from talaria.store.factory import configured_store
from talaria.testing import ScriptedProvider, text

pytestmark = pytest.mark.timeout(240)


def pg_home(path: Path, url: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    config = {"store": {"url": url}, "context": {"engine": "none"}, "memory": {"enabled": False}}
    (path / "config.yaml").write_text(yaml.safe_dump(config))
    return path


def model(provider: ScriptedProvider) -> list[str]:
    return ["--base-url", provider.openai_base_url, "--model", "scripted-model", "--api-key", "k"]


def stored(url: str, home: Path) -> dict[str, list[dict[str, Any]]]:
    """Every session in the PostgreSQL store, with its messages."""
    store = configured_store(Config.load(home, overrides={"store.url": url}))
    try:
        return {info.id: store.load_messages(info.id) for info in store.list_sessions(limit=100)}
    finally:
        store.close()


def said(messages: list[dict[str, Any]]) -> str:
    return " ".join(str(m.get("content")) for m in messages)


def cli(home: Path, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    if cwd is None:
        return talaria_cli(home, *argv)
    command = [sys.executable, "-m", "talaria.cli.main", *argv]
    env = agent_env(home)
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=90, cwd=cwd)


def test_a_session_the_server_starts_is_listed_resumed_and_counted_by_the_cli(
    provider: ScriptedProvider, pg_clean_url: str, tmp_path: Path
) -> None:
    home = pg_home(tmp_path / "home", pg_clean_url)
    provider.add(text("Noted: kumquat."), text("The word was kumquat."))
    with ServeProcess(provider, home) as serve, serve.http() as http:
        run = http.post("/v1/runs", json={"input": "remember the word kumquat"}).json()
        with http.stream("GET", f"/v1/runs/{run['run_id']}/events") as events:
            assert events.status_code == 200
            list(read_events(events))
        assert http.get(f"/v1/runs/{run['run_id']}").json()["status"] == "completed"
    session_id = run["session_id"]

    listed = cli(home, "sessions", "list")
    assert listed.returncode == 0 and session_id in listed.stdout, listed
    shown = cli(home, "sessions", "show", session_id)
    assert "remember the word kumquat" in shown.stdout, shown
    exported = cli(home, "sessions", "export", session_id)
    assert [json.loads(line)["role"] for line in exported.stdout.splitlines()] == [
        "user",
        "assistant",
    ]

    resumed = cli(home, "chat", "-q", "which word?", "--resume", session_id, *model(provider))
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "The word was kumquat."
    assert "remember the word kumquat" in said(provider.requests[-1].body["messages"])
    sessions = stored(pg_clean_url, home)
    assert list(sessions) == [session_id]
    assert [m["role"] for m in sessions[session_id]] == ["user", "assistant", "user", "assistant"]

    usage = cli(home, "usage", "--json")
    assert json.loads(usage.stdout)["total"]["calls"] == 2, usage
    by_session = cli(home, "usage", "--by", "session", "--json")
    assert [row["key"] for row in json.loads(by_session.stdout)["rows"]] == [session_id]
    doctor = cli(home, "doctor")
    database = pg_clean_url.rpartition("/")[2]
    assert any(
        "sessions" in line and "1 in postgresql://" in line and database in line
        for line in doctor.stdout.splitlines()
    ), doctor.stdout
    assert not (home / "state.db").exists()


def test_continue_finds_the_newest_session_in_postgresql(
    provider: ScriptedProvider, pg_clean_url: str, tmp_path: Path
) -> None:
    home = pg_home(tmp_path / "home", pg_clean_url)
    provider.add(text("First answer."), text("Second answer."))
    first = cli(home, "chat", "-q", "start with papaya", "--json", *model(provider))
    assert first.returncode == 0, first.stderr
    again = cli(home, "chat", "-q", "and then?", "-c", "--json", *model(provider))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["session_id"] == json.loads(first.stdout)["session_id"]
    assert "start with papaya" in said(provider.requests[-1].body["messages"])
    assert not (home / "state.db").exists()


def test_an_empty_postgresql_store_is_no_sessions_not_the_homes_file(
    pg_clean_url: str, tmp_path: Path
) -> None:
    home = pg_home(tmp_path / "home", pg_clean_url)
    assert cli(home, "sessions", "list").stdout.strip() == "no sessions yet"
    missing = cli(home, "chat", "-q", "hi", "--resume", "nothing-here", "--model", "m")
    assert missing.returncode == 2 and "nothing-here" in missing.stderr
    assert stored(pg_clean_url, home) == {}
    assert not (home / "state.db").exists()


def test_the_store_url_may_come_from_the_environment(
    provider: ScriptedProvider, pg_clean_url: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    provider.add(text("Stored in PostgreSQL."))
    env = {**agent_env(home), "TALARIA_STORE_URL": pg_clean_url}
    done = subprocess.run(
        [sys.executable, "-m", "talaria.cli.main", "chat", "-q", "hi", "--json", *model(provider)],
        capture_output=True, text=True, env=env, timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert list(stored(pg_clean_url, home)) == [json.loads(done.stdout)["session_id"]]
    assert not (home / "state.db").exists()


async def test_acp_stores_lists_and_loads_sessions_in_postgresql(
    provider: ScriptedProvider, pg_clean_url: str, tmp_path: Path
) -> None:
    home = pg_home(tmp_path / "home", pg_clean_url)
    work = tmp_path / "work"
    work.mkdir()
    provider.add(text("Hello from the editor."))
    async with connected(Editor(), provider, home) as conn:
        session = await conn.new_session(cwd=str(work), mcp_servers=[])
        await conn.prompt(session_id=session.session_id, prompt=[_block("hi there")])
    assert session.session_id in stored(pg_clean_url, home)
    assert session.session_id in cli(home, "sessions", "list").stdout

    editor = Editor()
    async with connected(editor, provider, home) as conn:
        listed = await conn.list_sessions(cwd=str(work))
        assert [s.session_id for s in listed.sessions] == [session.session_id]
        await conn.load_session(cwd=str(work), session_id=session.session_id, mcp_servers=[])
    replayed = "".join(
        u.content.text for u in editor.of(AgentMessageChunk) if hasattr(u.content, "text")
    )
    assert "Hello from the editor." in replayed
    assert not (home / "state.db").exists()


def _block(words: str) -> Any:
    from acp.schema import TextContentBlock

    return TextContentBlock(type="text", text=words)


def test_batch_tasks_are_sessions_in_postgresql(
    provider: ScriptedProvider, pg_clean_url: str, tmp_path: Path
) -> None:
    home = pg_home(tmp_path / "home", pg_clean_url)
    provider.add(text("one"), text("two"))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "a", "prompt": "first"}\n{"id": "b", "prompt": "second"}\n')
    done = cli(home, "batch", str(tasks), "-n", "1", *model(provider))
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in (tmp_path / "tasks.results.jsonl").open()]
    assert sorted(stored(pg_clean_url, home)) == sorted(r["session_id"] for r in results)
    assert not (home / "state.db").exists()


async def test_mcp_serve_runs_and_lists_sessions_in_postgresql(
    provider: ScriptedProvider, pg_clean_url: str, tmp_path: Path
) -> None:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    home = pg_home(tmp_path / "home", pg_clean_url)
    provider.add(text("Done over MCP."))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "talaria.cli.main", "mcp", "serve", *model(provider), "--toolsets", ""],
        env=agent_env(home),
        cwd=str(tmp_path),
    )
    async with Client(params) as client:
        task = json.loads((await client.call_tool("run_task", {"prompt": "go"})).content[0].text)
        listed = await client.call_tool("list_sessions", {"limit": 5})
        huge = await client.call_tool("list_sessions", {"limit": 10**30})
    assert task["final_response"] == "Done over MCP."
    assert [s["session_id"] for s in listed.structured_content["result"]] == [task["session_id"]]
    assert list(stored(pg_clean_url, home)) == [task["session_id"]]
    assert huge.is_error and "limit must be from 1 to 500" in huge.content[0].text
    assert not (home / "state.db").exists()


async def test_a_worker_stores_durable_turns_in_postgresql(
    provider: ScriptedProvider,
    pg_clean_url: str,
    tmp_path: Path,
    temporal_target: str,
    queue: str,
    workers: list[Any],
) -> None:
    from temporal_cluster import WorkerProcess, worker_home

    home = worker_home(tmp_path / "home", store_url=pg_clean_url)
    provider.add(text("Durable and stored."), text("Resumed locally."))
    workers.append(await asyncio.to_thread(WorkerProcess, temporal_target, queue, provider, home))
    durable = await asyncio.to_thread(
        cli, home, "chat", "-q", "a durable turn", "--temporal", temporal_target,
        "--task-queue", queue, "--json",
    )  # fmt: skip
    assert durable.returncode == 0, durable.stderr
    session_id = json.loads(durable.stdout)["session_id"]
    assert session_id in (await asyncio.to_thread(cli, home, "sessions", "list")).stdout
    local = await asyncio.to_thread(
        cli, home, "chat", "-q", "and here?", "--resume", session_id, *model(provider)
    )
    assert local.returncode == 0, local.stderr
    assert "a durable turn" in said(provider.requests[-1].body["messages"])
    assert not (home / "state.db").exists()
