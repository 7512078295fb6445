"""Faults of the session database that used to lose data without a word: the file deleted
under a running agent or server, two processes starting one new session id at once, and
garbage written into the middle of the file. Each is one clear line before anything is
answered, one session, or a database that is read and never written."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import openai
import pytest

from helpers import scripted_agent
from server_helpers import ServeProcess
from talaria.store.base import StoreUnwritable
from talaria.store.sqlite import SQLiteSessionStore
from talaria.store.sqlite_check import odd_pages
from talaria.testing import ScriptedProvider, text

pytestmark = pytest.mark.timeout(180)
GARBAGE = b"\xde\xad\xbe\xef" * 2048
"""Two 4 KB pages' worth: wherever it lands, it covers a page's first byte."""


def test_deleting_the_home_under_an_agent_fails_the_next_turn_before_the_model_is_asked(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    provider.add(text("first"), text("never sent"))
    with scripted_agent(provider, home) as agent:
        assert agent.chat("one") == "first"
        shutil.rmtree(home)
        with pytest.raises(StoreUnwritable, match="was deleted or replaced while talaria"):
            agent.run_conversation("two")
    assert len(provider.requests) == 1


def test_deleting_the_home_under_the_server_is_an_error_not_an_unsaved_answer(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    provider.add(text("first"), text("never sent"))
    with ServeProcess(provider, home, cwd=tmp_path) as serve:
        client = openai.OpenAI(base_url=serve.url + "/v1", api_key=serve.key, max_retries=0)
        first = client.chat.completions.create(
            model="talaria", messages=[{"role": "user", "content": "one"}]
        )
        assert first.choices[0].message.content == "first"
        shutil.rmtree(home)
        with pytest.raises(openai.APIStatusError) as failed:
            client.chat.completions.create(
                model="talaria", messages=[{"role": "user", "content": "two"}]
            )
    assert failed.value.status_code == 502
    assert "was deleted or replaced while talaria was running" in str(failed.value)
    assert "StoreUnwritable" not in str(failed.value)
    assert len(provider.requests) == 1


RACER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from talaria import Agent

    home, base_url, session_id, go, ready = sys.argv[1:6]
    agent = Agent(model="scripted-model", api_key="k", base_url=base_url, home=home,
                  session_id=session_id, toolsets=[], config={"context.engine": "none"})
    agent.warm_up()
    Path(ready).touch()
    while not Path(go).exists():
        time.sleep(0.001)
    result = agent.run_conversation("hello")
    agent.close()
    print(json.dumps({"session_id": result["session_id"], "error": result.get("error")}))
    """
)


def test_two_processes_starting_one_new_session_end_in_one_session(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    rounds = 6
    provider.add(*[text("hi") for _ in range(2 * rounds)])
    for round_ in range(rounds):
        session_id, go = f"race-{round_}", tmp_path / f"go-{round_}"
        racers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    RACER,
                    str(home),
                    provider.openai_base_url,
                    session_id,
                    str(go),
                    str(tmp_path / f"ready-{round_}-{n}"),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(2)
        ]
        while len(list(tmp_path.glob(f"ready-{round_}-*"))) < 2:  # both wait for the word
            assert all(racer.poll() is None for racer in racers)
            time.sleep(0.01)
        go.touch()
        for racer in racers:
            out, err = racer.communicate(timeout=60)
            assert racer.returncode == 0 and "Traceback" not in err, err
            assert json.loads(out)["session_id"] == session_id
    with SQLiteSessionStore(home / "state.db") as store:
        sessions = store.list_sessions(limit=100)
        assert sorted(s.id for s in sessions) == [f"race-{n}" for n in range(rounds)]
        for info in sessions:
            roles = [m["role"] for m in store.load_messages(info.id)]
            assert roles in (["user", "assistant"], ["user", "assistant"] * 2), roles


def _talaria(home: Path, provider: ScriptedProvider, *argv: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "talaria.cli.main", *argv, "--home", str(home),
               "--base-url", provider.openai_base_url, "--model", "scripted-model",
               "--api-key", "k"]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=home)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_damaged_database_is_found_at_open_and_never_written(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("context:\n  engine: none\nmemory:\n  enabled: false\n")
    provider.add(*[text(f"answer {n} " + "words " * 400) for n in range(8)], text("never"))
    for n in range(8):
        assert _talaria(home, provider, "chat", "-q", f"question {n} " * 200).returncode == 0
    database = home / "state.db"
    assert not odd_pages(str(database))
    with database.open("r+b") as handle:
        handle.seek(database.stat().st_size // 2 + 123)
        handle.write(GARBAGE)
    before = _digest(database)
    asked = len(provider.requests)

    refused = _talaria(home, provider, "chat", "-q", "one more")
    assert refused.returncode == 2
    line = refused.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith(f"talaria: session database {database} is damaged")
    assert f"mv {database} {database}.corrupt" in line and ".recover" in line
    assert line.endswith("the question was not sent")
    serve = subprocess.run(
        [sys.executable, "-m", "talaria.cli.main", "serve", "--port", "0", "--home", str(home)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert serve.returncode == 2 and f"session database {database} is damaged" in serve.stderr
    assert len(provider.requests) == asked
    assert _digest(database) == before
    assert not Path(f"{database}-wal").exists() or Path(f"{database}-wal").stat().st_size == 0


def test_a_page_with_a_start_no_page_has_is_odd(tmp_path: Path) -> None:
    database = tmp_path / "state.db"
    with SQLiteSessionStore(database) as store:
        store.create_session("s1")
        store.append_messages(
            "s1", [(n, {"role": "user", "content": "x" * 3000}) for n in range(20)]
        )
    assert not odd_pages(str(database))
    page = 4096
    with database.open("r+b") as handle:
        handle.seek(5 * page)
        handle.write(b"garbage!")
    assert odd_pages(str(database))
