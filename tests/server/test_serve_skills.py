"""Skills through `talaria serve`: a run whose input is `/<skill-name> request` (what the web
page sends) gives the model the skill's instructions; other text starting with / is sent as
it is."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from server_helpers import ServeProcess, read_events
from talaria.testing import ScriptedProvider, text


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def _turn(http: httpx.Client, text: str) -> None:
    run = http.post("/v1/runs", json={"input": text}).json()
    with http.stream("GET", run["events_url"]) as stream:
        assert [event.name for event in read_events(stream)][-1] == "run.completed"


def test_a_run_invokes_a_skill_by_name(provider: ScriptedProvider, tmp_path: Path) -> None:
    home, work = tmp_path / "talaria", tmp_path / "work"
    folder = work / ".talaria" / "skills" / "triage"
    folder.mkdir(parents=True)
    home.mkdir()
    (home / "config.yaml").write_text("context:\n  engine: none\n")
    (folder / "SKILL.md").write_text(
        "---\nname: triage\ndescription: Label new issues\n---\nLabel by component."
    )
    provider.add(text("labelled"), text("no such skill"))
    with ServeProcess(provider, home, cwd=work) as serve, serve.http() as http:
        _turn(http, "/triage issue 42")
        _turn(http, "/usr is full")

    invoked = provider.requests[0].body["messages"][-1]["content"]
    assert invoked.startswith("[The user invoked the skill /triage.")
    assert "Label by component." in invoked and invoked.endswith("request: issue 42")
    assert provider.requests[1].body["messages"][-1]["content"] == "/usr is full"
