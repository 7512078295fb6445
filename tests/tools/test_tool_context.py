"""`ToolContext`: what a running tool may use of its agent. A tool asks for a human's yes
through `ctx.approver`, the same request path the loop asks through before a call: grants
count, approvals off applies, no one to ask means no, and the question is an
`ApprovalRequested` event any front end (or a sub-agent's root) answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers import scripted_agent, tool_results
from talaria import ToolContext, tool
from talaria.agent_tools.services import AgentServices
from talaria.events import ApprovalRequested, Event
from talaria.testing import ScriptedProvider, call, text

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
