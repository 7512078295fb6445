"""`talaria serve` through its real HTTP surface: the official openai SDK as the client, a real
uvicorn process, the scripted provider behind it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import openai
import pytest

from server_helpers import KEY, ServeProcess, SseEvent, read_events
from talaria.store.sqlite import SQLiteSessionStore
from talaria.testing import ScriptedProvider, call, text
from talaria.testing.script import Reply

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider() as server:
        yield server


@pytest.fixture(scope="module")
def serve(
    provider: ScriptedProvider, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServeProcess]:
    with ServeProcess(provider, tmp_path_factory.mktemp("serve-home")) as server:
        yield server


@pytest.fixture
def client(serve: ServeProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=serve.url + "/v1", api_key=KEY, max_retries=0)


def _texts(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages if isinstance(m.get("content"), str)]


def _run_events(
    serve: ServeProcess, run_id: str, last_event_id: int | None = None
) -> list[SseEvent]:
    headers = dict(serve.headers)
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    with httpx.stream(
        "GET", f"{serve.url}/v1/runs/{run_id}/events", headers=headers, timeout=30
    ) as r:
        assert r.status_code == 200
        return list(read_events(r))


def _wait_for(condition: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


# ---- OpenAI-compatible endpoints -------------------------------------------------------------


def test_chat_completion_answers_and_the_session_header_continues_the_conversation(
    client: openai.OpenAI, provider: ScriptedProvider
) -> None:
    provider.add(text("Paris is the capital."), text("About 2.1 million people."))
    raw = client.chat.completions.with_raw_response.create(
        model="talaria", messages=[{"role": "user", "content": "Capital of France?"}]
    )
    session = raw.headers["x-talaria-session"]
    first = raw.parse()
    assert first.choices[0].message.content == "Paris is the capital."
    assert first.usage is not None and first.usage.total_tokens > 0

    second = client.chat.completions.with_raw_response.create(
        model="talaria",
        messages=[{"role": "user", "content": "How many live there?"}],
        extra_headers={"X-Talaria-Session": session},
    )
    assert second.headers["x-talaria-session"] == session
    assert second.parse().choices[0].message.content == "About 2.1 million people."
    sent = _texts(provider.requests[-1].body["messages"])
    assert sent[-3:] == ["Capital of France?", "Paris is the capital.", "How many live there?"]


def test_chat_completion_streams_the_answer_with_usage(
    client: openai.OpenAI, provider: ScriptedProvider
) -> None:
    provider.add(text("one two three four five six", chunk_size=4))
    stream = client.chat.completions.create(
        model="talaria",
        messages=[{"role": "user", "content": "count"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    deltas = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert "".join(deltas) == "one two three four five six"
    assert len(deltas) > 1, "the answer arrives in pieces"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_without_a_session_the_clients_history_seeds_a_new_one(
    client: openai.OpenAI, provider: ScriptedProvider
) -> None:
    provider.add(text("Blue."))
    answer = client.chat.completions.create(
        model="talaria",
        messages=[
            {"role": "system", "content": "client system prompt"},
            {"role": "user", "content": "My favourite colour is blue."},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "What is my favourite colour?"},
        ],
    )
    assert answer.choices[0].message.content == "Blue."
    sent = provider.requests[-1].body["messages"]
    assert _texts(sent)[-3:] == [
        "My favourite colour is blue.",
        "Noted.",
        "What is my favourite colour?",
    ]
    assert "client system prompt" not in str(sent), "the agent keeps its own system prompt"


def test_an_approval_cannot_be_asked_on_chat_completions_so_it_is_denied_and_the_model_told(
    client: openai.OpenAI, provider: ScriptedProvider, serve: ServeProcess
) -> None:
    target = serve.home / "keep-me"
    target.mkdir()
    provider.add(call("terminal", {"command": f"rm -rf {target}"}), text("I could not delete it."))
    answer = client.chat.completions.create(
        model="talaria", messages=[{"role": "user", "content": "delete it"}]
    )
    assert answer.choices[0].message.content == "I could not delete it."
    assert target.exists()
    tool_result = provider.requests[-1].body["messages"][-1]
    assert tool_result["role"] == "tool"
    assert "no one is available to approve" in tool_result["content"]


def test_unknown_model_and_unknown_session_are_clear_errors(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError, match="unknown model 'gpt-4'"):
        client.chat.completions.create(model="gpt-4", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.NotFoundError, match="no session 'nope'"):
        client.chat.completions.create(
            model="talaria",
            messages=[{"role": "user", "content": "x"}],
            extra_headers={"X-Talaria-Session": "nope"},
        )
    assert [m.id for m in client.models.list()] == ["talaria"]


def test_responses_continue_with_previous_response_id(
    client: openai.OpenAI, provider: ScriptedProvider
) -> None:
    provider.add(text("Noted: 42."), text("You said 42."))
    first = client.responses.create(model="talaria", input="Remember the number 42.")
    assert first.output_text == "Noted: 42."
    second = client.responses.create(
        model="talaria", input="Which number did I say?", previous_response_id=first.id
    )
    assert second.output_text == "You said 42."
    assert second.previous_response_id == first.id
    sent = _texts(provider.requests[-1].body["messages"])
    assert "Remember the number 42." in sent and "Noted: 42." in sent
    with pytest.raises(openai.NotFoundError, match="no response"):
        client.responses.create(model="talaria", input="x", previous_response_id="resp_made_up")


def test_responses_stream_parses_with_the_sdks_stream_helper(
    client: openai.OpenAI, provider: ScriptedProvider
) -> None:
    provider.add(text("Streaming through the Responses API.", chunk_size=6), text("Again."))
    with client.responses.stream(model="talaria", input="stream please") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert final.output_text == "Streaming through the Responses API."
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds.count("response.output_text.delta") > 1
    assert kinds[-1] == "response.completed"
    again = client.responses.create(model="talaria", input="more", previous_response_id=final.id)
    assert again.output_text == "Again."


# ---- runs -------------------------------------------------------------------------------------


def test_a_run_asks_for_approval_over_http_and_runs_the_tool_once_approved(
    serve: ServeProcess, provider: ScriptedProvider
) -> None:
    target = serve.home / "scratch"  # the server's working directory (the sandbox's workspace)
    target.mkdir()
    provider.add(call("terminal", {"command": f"rm -rf {target}"}), text("Deleted **scratch**."))
    with serve.http() as http:
        started = http.post("/v1/runs", json={"input": "remove the scratch dir"})
        assert started.status_code == 202
        run = started.json()
        seen: list[SseEvent] = []
        with http.stream("GET", run["events_url"]) as stream:
            for event in read_events(stream):
                seen.append(event)
                if event.name == "approval.requested":
                    assert event.data["command"] == f"rm -rf {target}"
                    assert event.data["reason"]
                    answer = http.post(
                        f"/v1/runs/{run['run_id']}/approvals/{event.data['request_id']}",
                        json={"decision": "once"},
                    )
                    assert answer.status_code == 200, answer.text
    names = [e.name for e in seen]
    assert names[0] == "run.started" and names[-1] == "run.completed"
    for expected in ("approval.requested", "approval.resolved", "tool.started", "tool.completed"):
        assert expected in names
    assert names.index("approval.resolved") < names.index("tool.completed")
    assert [e.id for e in seen] == list(range(1, len(seen) + 1))
    assert seen[-1].data["final_response"] == "Deleted **scratch**."
    assert seen[-1].data["usage"]["total_tokens"] > 0
    assert not target.exists()


def test_a_run_asks_a_clarify_question_and_the_http_answer_reaches_the_model(
    serve: ServeProcess, provider: ScriptedProvider
) -> None:
    provider.add(
        call("clarify", {"question": "Which colour?", "choices": ["red", "blue"]}),
        text("Blue it is."),
    )
    with serve.http() as http:
        run = http.post("/v1/runs", json={"input": "paint it"}).json()
        seen: list[SseEvent] = []
        with http.stream("GET", run["events_url"]) as stream:
            for event in read_events(stream):
                seen.append(event)
                if event.name == "clarify.requested":
                    assert event.data["question"] == "Which colour?"
                    assert event.data["choices"] == ["red", "blue"]
                    url = f"/v1/runs/{run['run_id']}/clarify/{event.data['request_id']}"
                    assert http.post(url, json={"answer": "blue"}).status_code == 200
                    late = http.post(url, json={"answer": "red"})
                    # refused: no longer pending (404), or the run already finished (409)
                    assert late.status_code in (404, 409), late.text
    names = [e.name for e in seen]
    assert "clarify.resolved" in names and names[-1] == "run.completed"
    (result,) = [e.data["result"] for e in seen if e.name == "tool.completed"]
    assert "blue" in result
    assert "blue" in provider.requests[-1].body["messages"][-1]["content"]
    assert not provider.requests[-1].body["messages"][-1]["content"].endswith("red")


def test_reconnecting_with_last_event_id_resumes_after_what_the_client_saw(
    serve: ServeProcess, provider: ScriptedProvider
) -> None:
    provider.add(text("a fairly long answer in many small pieces", chunk_size=3))
    with serve.http() as http:
        run = http.post("/v1/runs", json={"input": "talk"}).json()
    everything = _run_events(serve, run["run_id"])
    assert everything[0].name == "run.started", "a late client still sees the run from its start"
    resumed = _run_events(serve, run["run_id"], last_event_id=3)
    assert resumed == everything[3:]
    deltas = "".join(e.data["text"] for e in everything if e.name == "message.delta")
    assert deltas == "a fairly long answer in many small pieces"


def test_cancel_stops_a_run_and_a_busy_session_refuses_a_second_run(
    serve: ServeProcess, provider: ScriptedProvider
) -> None:
    provider.add(Reply(text="too late", delay=30))
    asked_before = len(provider.requests)
    with serve.http() as http:
        run = http.post("/v1/runs", json={"input": "take your time"}).json()
        _wait_for(lambda: len(provider.requests) > asked_before)  # the model is thinking
        second = http.post("/v1/runs", json={"input": "me too", "session_id": run["session_id"]})
        assert second.status_code == 409
        assert second.json()["error"]["type"] == "session_busy"
        assert http.post(f"/v1/runs/{run['run_id']}/cancel").status_code == 202
        events = _run_events(serve, run["run_id"])
        assert events[-1].name == "run.cancelled"
        assert http.get(f"/v1/runs/{run['run_id']}").json()["status"] == "cancelled"
        assert http.post(f"/v1/runs/{run['run_id']}/cancel").status_code == 409


def test_a_client_that_disconnects_does_not_stop_the_run(
    serve: ServeProcess, provider: ScriptedProvider
) -> None:
    provider.add(Reply(text="finished anyway", delay=0.5))
    with serve.http() as http:
        run = http.post("/v1/runs", json={"input": "go"}).json()
        with http.stream("GET", run["events_url"]) as stream:
            next(read_events(stream))  # run.started, then hang up
    events = _run_events(serve, run["run_id"])
    assert events[-1].name == "run.completed"
    assert events[-1].data["final_response"] == "finished anyway"


# ---- sessions ---------------------------------------------------------------------------------


def test_sessions_list_read_rename_fork_delete_on_the_clis_store(
    serve: ServeProcess, provider: ScriptedProvider
) -> None:
    provider.add(text("stored answer", usage={"input_tokens": 30, "output_tokens": 5}))
    with serve.http() as http:
        run = http.post("/v1/runs", json={"input": "store this"}).json()
        _run_events(serve, run["run_id"])
        session_id = run["session_id"]
        assert session_id in [s["id"] for s in http.get("/v1/sessions").json()["data"]]
        read = http.get(f"/v1/sessions/{session_id}").json()
        assert _texts(read["messages"]) == ["store this", "stored answer"]
        assert read["usage"]["total_tokens"] > 0 and "cost_usd" in read
        (by_model,) = read["usage_by_model"]  # the numbers `talaria usage` shows
        assert (by_model["calls"], by_model["input_tokens"], by_model["output_tokens"]) == (
            1,
            30,
            5,
        )
        renamed = http.patch(f"/v1/sessions/{session_id}", json={"title": "kept"}).json()
        assert renamed["title"] == "kept"
        fork = http.post(f"/v1/sessions/{session_id}/fork", json={}).json()
        assert fork["id"] != session_id and fork["message_count"] == 2
        with SQLiteSessionStore(serve.home / "state.db") as store:  # the CLI's store
            assert store.resolve("kept") == session_id
            assert _texts(store.load_messages(fork["id"])) == ["store this", "stored answer"]
        assert http.delete(f"/v1/sessions/{session_id}").json()["deleted"] is True
        gone = http.get(f"/v1/sessions/{session_id}")
        assert gone.status_code == 404 and gone.json()["error"]["type"] == "not_found"
        assert http.get(f"/v1/sessions/{fork['id']}").status_code == 200


def test_a_fork_that_fails_midway_leaves_no_half_session(
    serve: ServeProcess, provider: ScriptedProvider
) -> None:
    provider.add(text("to be forked"))
    with serve.http() as http:
        run = http.post("/v1/runs", json={"input": "fork me"}).json()
        _run_events(serve, run["run_id"])
        before = {s["id"] for s in http.get("/v1/sessions").json()["data"]}
        # The copy's messages are refused by the database itself (as a full disk would).
        with sqlite3.connect(serve.home / "state.db") as db:
            db.execute(
                "CREATE TRIGGER refuse_copy BEFORE INSERT ON messages "
                f"WHEN NEW.session_id <> '{run['session_id']}' "
                "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
            )
        try:
            failed = http.post(f"/v1/sessions/{run['session_id']}/fork", json={"title": "half"})
        finally:
            with sqlite3.connect(serve.home / "state.db") as db:
                db.execute("DROP TRIGGER refuse_copy")
        assert failed.status_code == 503 and "disk is full" in failed.json()["error"]["message"]
        assert {s["id"] for s in http.get("/v1/sessions").json()["data"]} == before
        again = http.post(f"/v1/sessions/{run['session_id']}/fork", json={"title": "half"})
        assert again.status_code == 201 and again.json()["message_count"] == 2


# ---- auth, limits, one error shape ------------------------------------------------------------


def test_without_the_key_every_route_but_health_and_the_page_is_401(serve: ServeProcess) -> None:
    bad = openai.OpenAI(base_url=serve.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    for path in ("/v1/sessions", "/openapi.json", "/v1/sessions?key=" + KEY):
        response = httpx.get(serve.url + path, cookies={"talaria_key": KEY})
        assert response.status_code == 401
        assert response.json()["error"]["type"] == "unauthorized"
    assert httpx.get(serve.url + "/health").json()["status"] == "ok"
    page = httpx.get(serve.url + "/", params={"token": "anything"})  # static: holds no data
    assert page.status_code == 200 and "set-cookie" not in page.headers


def test_errors_share_one_json_shape(serve: ServeProcess) -> None:
    with serve.http() as http:
        cases = {
            404: http.get("/v1/nothing"),
            405: http.delete("/v1/runs"),
            400: http.post(
                "/v1/runs", content=b"{not json", headers={"content-type": "application/json"}
            ),
            422: http.post("/v1/runs", json={"input": 3}),
            413: http.post(
                "/v1/runs",
                content=b"x" * (5 * 1024 * 1024),
                headers={"content-type": "application/json"},
            ),
            415: http.post("/v1/runs", content=b'{"input": "hi"}'),
        }
    for status, response in cases.items():
        assert response.status_code == status
        error = response.json()["error"]
        assert set(error) == {"type", "message"} and error["message"]


def test_an_open_address_without_a_strong_key_is_refused_at_startup(tmp_path: Path) -> None:
    for key in (None, "short"):
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path), "HOME": str(tmp_path)}
        if key:
            env["TALARIA_SERVER_KEY"] = key
        done = subprocess.run(
            [sys.executable, "-m", "talaria.cli.main", "serve", "--host", "0.0.0.0", "--port", "0",
             "--home", str(tmp_path)],
            env=env, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert done.returncode == 2
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "at least 16 characters" in lines[0]


def test_import_talaria_does_not_import_the_server_stack() -> None:
    code = (
        "import sys, talaria; talaria.Agent(model='m', api_key='k', base_url='http://x/v1');"
        "print(sorted(m for m in ('starlette', 'uvicorn', 'talaria.server') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_an_evicted_session_agent_is_rebuilt_from_the_store(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(
        "context:\n  engine: none\nmemory:\n  enabled: false\nserver:\n  max_live_sessions: 1\n"
    )
    steps = [text("A one."), text("B one."), text("A two.")]
    with ScriptedProvider(steps) as provider, ServeProcess(provider, home) as serve:
        client = openai.OpenAI(base_url=serve.url + "/v1", api_key=KEY, max_retries=0)
        sessions = []
        for question in ("first A", "first B"):
            raw = client.chat.completions.with_raw_response.create(
                model="talaria", messages=[{"role": "user", "content": question}]
            )
            sessions.append(raw.headers["x-talaria-session"])
        again = client.chat.completions.create(
            model="talaria",
            messages=[{"role": "user", "content": "second A"}],
            extra_headers={"X-Talaria-Session": sessions[0]},
        )
    assert again.choices[0].message.content == "A two."
    assert _texts(provider.requests[-1].body["messages"])[-3:] == ["first A", "A one.", "second A"]
