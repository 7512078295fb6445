"""`ToolContext`: what a running tool may use of its agent. A tool asks for a human's yes
through `ctx.approver`, the same request path the loop asks through before a call: grants
count, approvals off applies, no one to ask means no, and the question is an
`ApprovalRequested` event any front end (or a sub-agent's root) answers."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from helpers import scripted_agent, tool_results
from talaria import ToolContext, tool
from talaria.agent_tools.services import AgentServices
from talaria.core import ToolCall
from talaria.events import ApprovalRequested, Event
from talaria.interaction import Interactions
from talaria.interrupt import InterruptSignal
from talaria.plugins.hooks import HookBus
from talaria.policy.approval import ApprovalState
from talaria.testing import ScriptedProvider, call, text
from talaria.tools.approvals import CallApprover
from talaria.tools.executor import ToolExecutor

pytestmark = pytest.mark.timeout(60)


@tool
async def deploy(target: str, ctx: ToolContext) -> str:
    """Deploy the site to a target.

    Args:
        target: where to deploy
    """
    assert ctx.approver is not None
    verdict = await ctx.approver.ask(f"deploy {target}", "changes what users see")
    return "deployed" if verdict == "approved" else f"not deployed: {verdict}"


@tool
async def escape(ctx: ToolContext) -> str:
    """Run something outside the sandbox."""
    assert ctx.approver is not None
    return await ctx.approver.ask("run outside", "leaves the sandbox", needs_a_human=True)


def _two_deploys() -> list[Any]:
    return [call("deploy", {"target": "prod"}), call("deploy", {"target": "prod"}), text("done")]


def test_a_tool_asks_through_the_agents_requests_and_a_session_grant_is_remembered(
    tmp_path: Path,
) -> None:
    asked: list[ApprovalRequested] = []
    with ScriptedProvider(_two_deploys()) as server:
        agent = scripted_agent(server, tmp_path, tools=[deploy])

        def answer(event: Event) -> None:
            if isinstance(event, ApprovalRequested):
                asked.append(event)
                agent.respond(event.request_id, "session")

        agent.subscribe(answer, answers=("approval",))
        result = agent.run_conversation("ship it")
    assert tool_results(result) == ["deployed", "deployed"]
    assert [(e.tool_name, e.command, e.reason) for e in asked] == [
        ("deploy", "deploy prod", "changes what users see")
    ]
    first_call = result["messages"][1]["tool_calls"][0]["id"]
    assert asked[0].call_id == first_call and asked[0].arguments == {"target": "prod"}


def test_a_denial_reaches_the_tool(tmp_path: Path) -> None:
    with ScriptedProvider(_two_deploys()) as server:
        agent = scripted_agent(server, tmp_path, tools=[deploy])
        agent.subscribe(
            lambda e: isinstance(e, ApprovalRequested) and agent.respond(e.request_id, "deny"),
            answers=("approval",),
        )
        result = agent.run_conversation("ship it")
    assert tool_results(result) == ["not deployed: denied", "not deployed: denied"]


def test_with_no_one_to_answer_a_tools_question_is_a_no(tmp_path: Path) -> None:
    with ScriptedProvider(_two_deploys()) as server:
        result = scripted_agent(server, tmp_path, tools=[deploy]).run_conversation("ship it")
    assert tool_results(result) == ["not deployed: no_one", "not deployed: no_one"]


def test_approvals_off_allow_what_needs_no_human_and_refuse_what_does(tmp_path: Path) -> None:
    script = [call("deploy", {"target": "prod"}), call("escape", {}), text("done")]
    with ScriptedProvider(script) as server:
        agent = scripted_agent(
            server, tmp_path, tools=[deploy, escape], config={"approvals.mode": "off"}
        )
        result = agent.run_conversation("ship it")
    assert tool_results(result) == ["deployed", "unattended"]


def test_a_context_typed_with_its_services_is_hidden_from_the_model() -> None:
    @tool
    def where(ctx: ToolContext[AgentServices], detail: bool = False) -> str:
        """Which session this is."""
        return ctx.services.session_id

    @tool
    def maybe(ctx: ToolContext[AgentServices] | None = None) -> str:
        """Nothing."""
        return ""

    assert where.context_param == "ctx" and maybe.context_param == "ctx"
    assert list(where.parameters["properties"]) == ["detail"]
    assert maybe.parameters["properties"] == {}


async def test_a_sub_agents_executor_asks_its_roots_approver(tmp_path: Path) -> None:
    """A child's calls that need a yes are asked at the root (its events, its grants),
    not of the child's own front ends, of which it has none."""
    asked: list[ApprovalRequested] = []

    def root_front_end(event: Event) -> None:
        if isinstance(event, ApprovalRequested):
            asked.append(event)
            assert root_interactions.respond(event.request_id, "session")

    root_interactions = Interactions(root_front_end)
    root_interactions.add_responder(["approval"])
    root_grants = ApprovalState()
    root = CallApprover(root_grants, root_interactions, 30.0, "call_root", "delegate_task", {})
    child_events: list[Event] = []
    child = ToolExecutor(
        tools={"terminal": _echo_terminal()},
        hooks=HookBus(),
        approvals=ApprovalState(),
        interactions=Interactions(child_events.append),  # nobody answers the child itself
        approver=root,
    )

    def context(call: ToolCall, cancel: threading.Event) -> ToolContext:
        return ToolContext("task", "child-session", tmp_path, tmp_path, cancel, child_events.append)

    calls = [ToolCall("c1", "terminal", {"command": "rm -rf build"})]
    batch = await child.run_batch(calls, context, InterruptSignal(), child_events.append)
    assert [(e.call_id, e.tool_name, e.command) for e in asked] == [
        ("call_root", "terminal", "rm -rf build")
    ]
    assert root_grants.is_granted("rm -rf build")
    assert batch.messages[0]["content"] == "ran rm -rf build"
    assert not any(isinstance(e, ApprovalRequested) for e in child_events)


def _echo_terminal() -> Any:
    from talaria.tools.base import Tool

    def run(command: str) -> str:
        return f"ran {command}"

    return Tool(
        name="terminal",
        description="Run a command.",
        parameters={
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
        handler=run,
    )
