"""A sub-agent's approval over the runs API of a real `talaria serve`: the request names the
sub-agent and its task, the HTTP answer reaches the child, its calls are visible nested under
the delegate_task call, and a denial reaches the parent's model as a denial."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from browser_support import chromium
from server_helpers import ServeProcess, SseEvent, read_events
from talaria.testing import ScriptedProvider, call, text


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServeProcess, ScriptedProvider]]:
    """`talaria serve` with delegation and a home agent `cleaner` that may run commands."""
    home = tmp_path_factory.mktemp("serve-home")
    (home / "agents").mkdir()
    (home / "agents" / "cleaner.md").write_text(
        "---\nname: cleaner\ndescription: Removes what it is told to.\ntools: Bash\n---\n"
        "You remove folders.\n"
    )
    extra = ["--toolsets", "terminal,delegation"]
    with ScriptedProvider() as provider, ServeProcess(provider, home, extra_args=extra) as serve:
        yield serve, provider


def run_answering(serve: ServeProcess, decision: str) -> list[SseEvent]:
    """One run; every approval is answered with `decision` over HTTP."""
    seen: list[SseEvent] = []
    with serve.http() as http:
        run = http.post("/v1/runs", json={"input": "clean up"}).json()
        with http.stream("GET", run["events_url"]) as stream:
            for event in read_events(stream):
                seen.append(event)
                if event.name == "approval.requested":
                    answer = http.post(
                        f"/v1/runs/{run['run_id']}/approvals/{event.data['request_id']}",
                        json={"decision": decision},
                    )
                    assert answer.status_code == 200, answer.text
    return seen


@pytest.mark.parametrize(("decision", "status"), [("once", "completed"), ("deny", "denied")])
def test_a_childs_approval_is_answered_over_the_runs_api_and_reaches_the_parent(
    served: tuple[ServeProcess, ScriptedProvider], decision: str, status: str
) -> None:
    serve, provider = served
    target = serve.home / f"scratch-{decision}"
    target.mkdir()
    provider.add(
        call("delegate_task", {"agent": "cleaner", "goal": f"remove {target.name}"}),
        call("terminal", {"command": f"rm -rf {target}"}),
        text("removed, all fine"),
        text("parent done"),
    )
    seen = run_answering(serve, decision)
    delegate = next(e for e in seen if e.name == "tool.started")
    assert delegate.data["name"] == "delegate_task"
    (asked,) = [e for e in seen if e.name == "approval.requested"]
    assert asked.data["command"] == f"rm -rf {target}"
    assert asked.data["subagent"] == {
        "parent_call_id": delegate.data["call_id"],
        "agent": "cleaner",
        "task_index": 0,
        "task": f"remove {target.name}",
    }
    assert [e.data["decision"] for e in seen if e.name == "approval.resolved"] == [decision]
    nested = [e for e in seen if e.name.startswith("subagent.")]
    assert [e.name for e in nested] == [
        "subagent.tool.started",
        "subagent.tool.completed",
        "subagent.finished",
    ]
    assert nested[0].data["name"] == "terminal"
    assert nested[-1].data["final_response"] == "removed, all fine"
    assert nested[0].data["subagent"]["parent_call_id"] == delegate.data["call_id"]
    assert seen[-1].name == "run.completed"
    assert target.exists() is (decision == "deny")
    messages = provider.requests[-1].body["messages"]
    (content,) = [m["content"] for m in messages if m["role"] == "tool"]
    (entry,) = json.loads(content)["results"]
    assert entry["status"] == status
    if decision == "deny":
        assert entry["denied"][0]["message"].startswith("Denied by the user")


@pytest.mark.browser
@pytest.mark.timeout(120)
def test_the_web_page_names_the_child_that_asks_and_shows_its_calls(
    served: tuple[ServeProcess, ScriptedProvider],
) -> None:
    serve, provider = served
    target = serve.home / "scratch-web"
    target.mkdir()
    provider.add(
        call("delegate_task", {"agent": "cleaner", "goal": "remove scratch-web"}),
        call("terminal", {"command": f"rm -rf {target}"}),
        text("removed, all fine"),
        text("parent done"),
    )
    with chromium() as browser:
        page = browser.new_page()
        page.goto(f"{serve.url}/?token={serve.key}")
        page.fill("#input", "clean up")
        page.press("#input", "Enter")
        approval = page.locator(".card.approval")
        approval.wait_for(timeout=30_000)
        head = approval.locator(".head").inner_text()
        assert head == "Approval needed for cleaner (remove scratch-web)"
        approval.get_by_role("button", name="Deny").click()
        page.locator(".msg.assistant", has_text="parent done").wait_for(timeout=30_000)
        heads = page.locator(".card.tool .head").all_inner_texts()
    assert heads == ["⚙ delegate_task", "⚙ ↳ cleaner: terminal"]
    assert target.exists()
