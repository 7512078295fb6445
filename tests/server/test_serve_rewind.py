"""Checkpoints through `talaria serve`: what the agent changed (GET .../diff), its turns (GET
.../checkpoints), and POST .../rewind, against a real server process and a real workspace."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from server_helpers import ServeProcess, read_events, unattended_workspace
from talaria.testing import ScriptedProvider, call, text


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def _turn(http: httpx.Client, body: dict[str, str]) -> str:
    run = http.post("/v1/runs", json=body).json()
    with http.stream("GET", run["events_url"]) as stream:
        names = [event.name for event in read_events(stream)]
    assert names[-1] == "run.completed", names
    return str(run["session_id"])


def test_diff_checkpoints_and_rewind_end_to_end(provider: ScriptedProvider, tmp_path: Path) -> None:
    home, work = unattended_workspace(tmp_path)
    (work / "a b.txt").write_text("one\n")
    provider.add(call("terminal", {"command": "echo two > 'a b.txt' && echo new > ñ.txt"}))
    provider.add(text("edited"))
    with ServeProcess(provider, home, cwd=work) as serve, serve.http() as http:
        session = _turn(http, {"input": "edit the files"})
        assert (work / "a b.txt").read_text() == "two\n"

        diff = http.get(f"/v1/sessions/{session}/diff").json()["diff"]
        assert "-one" in diff and "+two" in diff and "+new" in diff
        assert http.get(f"/v1/sessions/{session}/diff?since=1").json()["diff"] == diff
        (turn,) = http.get(f"/v1/sessions/{session}/checkpoints").json()["data"]
        assert turn["id"] == 1 and sorted(turn["changed"]) == ["a b.txt", "ñ.txt"]
        assert turn["steps"] == ["terminal"]

        assert http.post(f"/v1/sessions/{session}/rewind", json={"turn": 7}).status_code == 404
        assert http.post(f"/v1/sessions/{session}/rewind", json={}).status_code == 422
        report = http.post(f"/v1/sessions/{session}/rewind", json={"turn": 1}).json()
        assert report["restored"] == ["a b.txt", "ñ.txt"] and report["conversation"] is True
        assert (work / "a b.txt").read_text() == "one\n" and not (work / "ñ.txt").exists()
        assert http.get(f"/v1/sessions/{session}").json()["message_count"] == 0

        undo = {"turn": report["undo"], "conversation": False}
        assert http.post(f"/v1/sessions/{session}/rewind", json=undo).status_code == 200
        assert (work / "a b.txt").read_text() == "two\n"

        rewind = f"/v1/sessions/{session}/rewind"
        assert http.post(rewind, json={"turn": 1, "step": 9}).status_code == 404
        step = http.post(rewind, json={"turn": 1, "step": 1}).json()  # the files only
        assert step["step"] == 1 and step["conversation"] is False
        assert step["restored"] == ["a b.txt", "ñ.txt"] and not (work / "ñ.txt").exists()

        assert http.delete(f"/v1/sessions/{session}").status_code == 200
        assert not (home / "checkpoints" / session).exists()
