"""Named sub-agents through `delegate_task`: their definitions decide their tools and model,
their approval and clarify requests reach whoever answers the root agent (here: the library's
callbacks and `respond`, and a chat of the gateway), and a refusal reaches the parent as a
refusal."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from gateway_support import running_gateway
from helpers import scripted_agent, when
from talaria import Agent
from talaria import events as ev
from talaria.cli.stream_json import event_record
from talaria.gateway.fake import press, user_message
from talaria.testing import Reply, Script, ScriptedProvider, call, text

FILE_TOOLS = {"read_file", "write_file", "patch", "search_files"}


def define(folder: Path, name: str, front_matter: str, body: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(f"---\n{front_matter}\n---\n{body or f'You are {name}.'}\n")


def is_child(body: dict[str, Any]) -> bool:
    return any("Goal:" in str(m.get("content")) for m in body["messages"] if m["role"] == "user")


def tool_names(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools", [])}


def answered(body: dict[str, Any]) -> bool:
    return body["messages"][-1]["role"] == "tool"


def results(result: dict[str, Any]) -> list[dict[str, Any]]:
    (content,) = [m["content"] for m in result["messages"] if m["role"] == "tool"]
    return list(json.loads(content)["results"])


def parent_agent(provider: ScriptedProvider, home: Path, **kwargs: Any) -> Agent:
    return scripted_agent(provider, home, tools=[], toolsets=["delegation"], **kwargs)


def script(delegate: dict[str, Any], child: Any) -> Script:
    """The parent delegates once and then answers "parent done"; `child(body)` answers the
    children (a goal's task finds itself in its user message)."""

    def step(body: dict[str, Any]) -> Reply:
        if is_child(body):
            return child(body)
        return text("parent done") if answered(body) else call("delegate_task", delegate)

    return Script(fallback=step)


def dangerous(target: Path) -> Any:
    """A child that tries to delete `target`, then claims success whatever happened."""

    def child(body: dict[str, Any]) -> Reply:
        if answered(body):
            return text("all cleaned up, everything went fine")
        return call("terminal", {"command": f"rm -rf {target}"})

    return child


def test_a_named_subagent_with_only_the_file_toolset_cannot_run_commands(tmp_path: Path) -> None:
    define(
        tmp_path / "agents",
        "reader",
        "name: reader\ndescription: Reads files and reports.\ntoolsets: [file]\n"
        "model: small-model\nmax_iterations: 4",
        "You read files. You never change anything.",
    )
    marker = tmp_path / "ran.txt"

    def child(body: dict[str, Any]) -> Reply:
        if answered(body):
            return text("could not run it")
        return call("terminal", {"command": f"touch {marker}"})

    with (
        ScriptedProvider(script=script({"agent": "reader", "goal": "run touch"}, child)) as p,
        parent_agent(p, tmp_path) as parent,
    ):
        result = parent.run_conversation(user_message="go")
    (entry,) = results(result)
    children = [r.body for r in p.requests if is_child(r.body)]
    assert tool_names(children[0]) == FILE_TOOLS
    assert children[0]["model"] == "small-model"
    assert children[0]["messages"][0]["content"] == "You read files. You never change anything."
    child_results = [m["content"] for m in children[-1]["messages"] if m["role"] == "tool"]
    assert "unknown tool 'terminal'" in child_results[0]
    assert not marker.exists()
    assert entry["agent"] == "reader" and entry["status"] == "completed"
    tools = p.requests[0].body["tools"]
    offered = next(t["function"] for t in tools if t["function"]["name"] == "delegate_task")
    assert "- reader: Reads files and reports." in offered["description"]


def test_a_claude_code_agent_file_gets_the_tools_its_names_stand_for(tmp_path: Path) -> None:
    define(
        tmp_path / ".claude" / "agents",
        "explorer",
        "name: explorer\ndescription: Explores.\ntools: Read, Glob, Task, NotebookEdit",
    )

    def child(body: dict[str, Any]) -> Reply:
        return text("explored")

    with (
        ScriptedProvider(script=script({"agent": "explorer", "goal": "look"}, child)) as p,
        parent_agent(p, tmp_path) as parent,
    ):
        result = parent.run_conversation(user_message="go")
    (entry,) = results(result)
    (child_request,) = [r.body for r in p.requests if is_child(r.body)]
    assert tool_names(child_request) == {"read_file", "search_files"}
    assert entry["status"] == "completed"


def test_a_childs_dangerous_command_is_approved_at_the_root_by_the_library(
    tmp_path: Path,
) -> None:
    target = tmp_path / "scratch"
    target.mkdir()
    define(tmp_path / ".talaria" / "agents", "cleaner", "description: Cleans up.")
    asked: list[ev.ApprovalRequested] = []
    seen: list[ev.Event] = []

    def approve(request: ev.ApprovalRequested) -> str:
        asked.append(request)
        return "once"

    delegate = {"agent": "cleaner", "goal": "remove scratch"}
    with (
        ScriptedProvider(script=script(delegate, dangerous(target))) as p,
        parent_agent(p, tmp_path, approval_callback=approve, event_callback=seen.append) as a,
    ):
        result = a.run_conversation(user_message="clean")
    (request,) = asked
    delegate_call = next(e for e in seen if isinstance(e, ev.ToolStarted))
    assert request.command == f"rm -rf {target}"
    assert request.subagent == ev.SubagentOrigin(
        delegate_call.call_id, "cleaner", 0, "remove scratch"
    )
    assert not target.exists()
    (entry,) = results(result)
    assert entry["status"] == "completed" and "denied" not in entry
    nested = [e for e in seen if isinstance(e, ev.SubagentEvent)]
    assert {e.origin.parent_call_id for e in nested} == {delegate_call.call_id}
    inner = [type(e.event).__name__ for e in nested]
    assert "ToolStarted" in inner and "ToolFinished" in inner and "TurnFinished" in inner
    assert result["final_response"] == "parent done"


def test_a_childs_denied_command_reaches_the_parent_as_a_denial(tmp_path: Path) -> None:
    target = tmp_path / "scratch"
    target.mkdir()
    with (
        ScriptedProvider(script=script({"goal": "remove scratch"}, dangerous(target))) as p,
        parent_agent(p, tmp_path, approval_callback=lambda request: "deny") as parent,
    ):
        result = parent.run_conversation(user_message="clean")
    (entry,) = results(result)
    assert target.exists()
    assert entry["status"] == "denied"
    assert entry["summary"] == "all cleaned up, everything went fine"
    (denial,) = entry["denied"]
    assert denial["command"] == f"rm -rf {target}"
    assert denial["message"].startswith("Denied by the user")


def test_with_nobody_to_answer_a_child_is_denied_and_the_parent_told(tmp_path: Path) -> None:
    target = tmp_path / "scratch"
    target.mkdir()
    seen: list[ev.Event] = []
    with (
        ScriptedProvider(script=script({"goal": "remove scratch"}, dangerous(target))) as p,
        parent_agent(p, tmp_path, event_callback=seen.append) as parent,
    ):
        result = parent.run_conversation(user_message="clean")
    (entry,) = results(result)
    assert target.exists()
    assert entry["status"] == "denied"
    assert "no one is available to approve it" in entry["denied"][0]["message"]
    assert not [e for e in seen if isinstance(e, ev.ApprovalRequested)]


@pytest.mark.parametrize("children", ["manual", "off"])
def test_a_definition_that_asks_nobody_is_denied_even_with_a_user_at_hand(
    tmp_path: Path, children: str
) -> None:
    target = tmp_path / "scratch"
    target.mkdir()
    define(tmp_path / "agents", "careful", "description: Never asks.\napprovals: deny")
    asked: list[Any] = []
    config = {"delegation.approvals": children}
    with (
        ScriptedProvider(
            script=script({"agent": "careful", "goal": "remove it"}, dangerous(target))
        ) as p,
        parent_agent(
            p, tmp_path, config=config, approval_callback=lambda r: asked.append(r) or "once"
        ) as a,
    ):
        result = a.run_conversation(user_message="clean")
    assert target.exists() and asked == []
    assert results(result)[0]["status"] == "denied"


def test_parallel_children_ask_at_once_and_each_answer_reaches_its_own_child(
    tmp_path: Path,
) -> None:
    left, right = tmp_path / "left", tmp_path / "right"
    left.mkdir()
    right.mkdir()

    def child(body: dict[str, Any]) -> Reply:
        goal = next(m["content"] for m in body["messages"] if m["role"] == "user")
        target = left if "left" in goal else right
        return text(f"done with {target.name}") if answered(body) else dangerous(target)(body)

    tasks = {"tasks": [{"goal": "remove left"}, {"goal": "remove right"}]}
    both_asked = threading.Event()
    config = {"delegation.max_concurrent_children": 2}
    with (
        ScriptedProvider(script=script(tasks, child)) as p,
        parent_agent(p, tmp_path, config=config) as parent,
    ):

        def answer(event: ev.Event) -> None:
            if isinstance(event, ev.ApprovalRequested) and len(parent.pending_requests) == 2:
                both_asked.set()
                for request in parent.pending_requests:
                    assert request.subagent is not None
                    decision = "once" if request.subagent.task == "remove left" else "deny"
                    parent.respond(request.request_id, decision)

        parent.subscribe(answer, answers=["approval"])
        result = parent.run_conversation(user_message="clean both")
    assert both_asked.is_set(), "the two children's requests were never pending together"
    assert not left.exists() and right.exists()
    statuses = [(r["goal"], r["status"]) for r in results(result)]
    assert statuses == [("remove left", "completed"), ("remove right", "denied")]


def test_interrupting_the_parent_withdraws_its_childs_request(tmp_path: Path) -> None:
    target = tmp_path / "scratch"
    target.mkdir()
    seen: list[ev.Event] = []
    with (
        ScriptedProvider(script=script({"goal": "remove scratch"}, dangerous(target))) as p,
        parent_agent(p, tmp_path, event_callback=seen.append) as parent,
    ):
        parent.subscribe(lambda event: None, answers=["approval"])  # asked, never answered
        when(lambda: parent.pending_requests, parent.interrupt)
        result = parent.run_conversation(user_message="clean")
    (asked,) = [e for e in seen if isinstance(e, ev.ApprovalRequested)]
    withdrawn = [e for e in seen if isinstance(e, ev.RequestWithdrawn)]
    assert [(e.request_id, e.reason) for e in withdrawn] == [(asked.request_id, "interrupted")]
    assert result["interrupted"] and target.exists()
    assert parent.pending_requests == []


def test_a_childs_clarify_question_is_answered_at_the_root(tmp_path: Path) -> None:
    define(tmp_path / "agents", "asker", "description: Asks.\ntools: [clarify, read_file]")
    questions: list[str] = []

    def child(body: dict[str, Any]) -> Reply:
        if answered(body):
            return text(f"told: {body['messages'][-1]['content']}")
        return call("clarify", {"question": "Which colour?"})

    def clarify(question: str, choices: list[str] | None) -> str:
        questions.append(question)
        return "blue"

    with (
        ScriptedProvider(script=script({"agent": "asker", "goal": "pick"}, child)) as p,
        parent_agent(p, tmp_path, clarify_callback=clarify) as parent,
    ):
        result = parent.run_conversation(user_message="ask")
    children = [r.body for r in p.requests if is_child(r.body)]
    assert tool_names(children[0]) == {"clarify", "read_file"}
    assert questions == ["Which colour?"]
    assert "blue" in results(result)[0]["summary"]


def test_inline_toolsets_and_unknown_names_are_the_models_to_fix(tmp_path: Path) -> None:
    replies = [
        call("delegate_task", {"goal": "x", "agent": "nobody"}),
        call("delegate_task", {"goal": "x", "toolsets": ["memory"]}),
        call("delegate_task", {"goal": "look", "toolsets": ["file"]}),
        text("looked"),
        text("parent done"),
    ]
    with ScriptedProvider(script=Script(replies)) as p, parent_agent(p, tmp_path) as parent:
        result = parent.run_conversation(user_message="go")
    tool_results = [m["content"] for m in result["messages"] if m["role"] == "tool"]
    assert tool_results[0] == "Error: no sub-agent named 'nobody'; available: none"
    assert 'must be one of "terminal", "file", "clarify"' in tool_results[1]
    child = next(r.body for r in p.requests if is_child(r.body))
    assert tool_names(child) == FILE_TOOLS
    assert json.loads(tool_results[2])["results"][0]["status"] == "completed"


def test_a_broken_definition_is_a_notice_and_the_others_still_work(tmp_path: Path) -> None:
    define(tmp_path / "agents", "loose", "description: Lifts approvals.\napprovals: off")
    define(tmp_path / ".claude" / "agents", "reviewer", "description: Reviews.\ntools: Read, Grep")
    notices: list[str] = []

    def keep(event: ev.Event) -> None:
        if isinstance(event, ev.Notice):
            notices.append(event.message)

    replies = [call("delegate_task", {"goal": "review", "agent": "reviewer"}), text("ok")]
    with (
        ScriptedProvider(script=Script([*replies, text("parent done")])) as p,
        parent_agent(p, tmp_path, event_callback=keep) as parent,
    ):
        parent.run_conversation(user_message="go")
    assert any("loose.md: approvals must be one of ask, deny" in n for n in notices)
    child = next(r.body for r in p.requests if is_child(r.body))
    assert tool_names(child) == {"read_file", "search_files"}


def test_stream_json_writes_a_childs_event_with_the_wrapped_events_type() -> None:
    origin = ev.SubagentOrigin("call_1", "cleaner", 0, "remove build")
    record = event_record(ev.SubagentEvent(origin, ev.ToolStarted("c1", "terminal", {})))
    assert record["type"] == "subagent_event"
    assert record["origin"] == {
        "parent_call_id": "call_1",
        "agent": "cleaner",
        "task_index": 0,
        "task": "remove build",
    }
    assert record["event"] == {
        "type": "tool_started",
        "call_id": "c1",
        "name": "terminal",
        "arguments": {},
        "phase": "start",
    }


async def test_a_childs_approval_in_a_chat_names_it_and_a_denial_reaches_the_parent(
    tmp_path: Path,
) -> None:
    target = tmp_path / "scratch"
    target.mkdir()
    define(tmp_path / "agents", "cleaner", "description: Cleans.\ntoolsets: [terminal]")

    def child(body: dict[str, Any]) -> Reply:
        return text("cleaned") if answered(body) else dangerous(target)(body)

    def step(body: dict[str, Any]) -> Reply:
        if is_child(body):
            return child(body)
        if answered(body):
            status = json.loads(body["messages"][-1]["content"])["results"][0]["status"]
            return text(f"the cleaner ended {status}")
        return call("delegate_task", {"agent": "cleaner", "goal": "remove scratch"})

    agent = {"toolsets": ["delegation"], "tools": []}
    with ScriptedProvider(script=Script(fallback=step)) as server:
        async with running_gateway(server, tmp_path, agent=agent) as gw:
            await gw.platform.deliver(user_message("clean up"))
            question = await gw.platform.wait_for(lambda m: "Request 1" in m.text)
            assert question.text.startswith(
                f"Request 1: [cleaner: remove scratch] run `rm -rf {target}`?"
            )
            await gw.platform.deliver(press(question, "1:deny"))
            await gw.platform.wait_for(lambda m: m.text == "the cleaner ended denied")
    assert target.exists()
