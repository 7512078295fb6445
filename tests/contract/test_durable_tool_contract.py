"""The tool contract on a durable worker: a real `talaria worker` on a real Temporal dev server
runs calls generated from every built-in and agent tool's schema (a few per tool, all in one
model response, each call its own activity), one turn per API mode. Same checks as in-process
(test_builtin_tool_contract.py): the turn goes on, nothing internal reaches the model or the
client following the turn's events, wrong input is named."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from contract_agent import PROMPT, check_answer, check_turn, take_pending
from contract_hints import HINTS, REGISTERED, web_hints, workspace
from hypothesis import HealthCheck, Phase, given, settings
from schema_calls import GeneratedCall, as_json, calls

from helpers import MODES, base_url
from talaria.agent_tools.catalog import builtin_tools
from talaria.durable.client import DurableTurn, connect, start_turn
from talaria.testing import Reply, Script, ScriptedCall, ScriptedProvider, text
from temporal_cluster import WorkerProcess, worker_home
from web_support import WebSite, web_site

pytestmark = pytest.mark.timeout(300)

PER_TOOL = 2


@pytest.fixture
def site() -> Iterator[WebSite]:
    """The web tools' loopback site (config.yaml below offers them on it only)."""
    with web_site() as running:
        yield running


def _generated(site: WebSite) -> list[tuple[str, GeneratedCall]]:
    """A few generated calls of every registered tool (drawn once, not shrunk)."""
    drawn: list[tuple[str, GeneratedCall]] = []
    hints = {**HINTS, **web_hints(site)}
    for tool in builtin_tools():
        drawn.extend((tool.name, call) for call in _draw(tool.parameters, hints.get(tool.name)))
    return drawn


def _draw(schema: dict[str, Any], hints: Any) -> list[GeneratedCall]:
    drawn: list[GeneratedCall] = []

    @settings(
        max_examples=PER_TOOL,
        deadline=None,
        phases=[Phase.generate],
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(calls(schema, hints))
    def draw(generated: GeneratedCall) -> None:
        drawn.append(generated)

    draw()
    return drawn


class _Client:
    """Follows one turn: keeps its events, denies approvals, answers clarify questions."""

    def __init__(self, turn: DurableTurn) -> None:
        self.turn = turn
        self.events: list[dict[str, Any]] = []

    async def on_event(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        if event["type"] == "ApprovalRequested":
            await self.turn.respond(event["request_id"], "deny")
        elif event["type"] == "ClarifyRequested":
            await self.turn.respond(event["request_id"], "yes")


async def test_generated_calls_keep_the_contract_on_a_durable_worker(
    temporal_target: str, tmp_path: Path, queue: str, workers: list[WorkerProcess], site: WebSite
) -> None:
    home = worker_home(tmp_path / "home")  # a worker's home is its working directory
    (home / "config.yaml").write_text(
        "durable:\n  heartbeat_timeout: 4.0\ndelegation:\n  max_iterations: 2\n"
        f"sandbox:\n  network: true\nweb:\n  allow_private: [localhost]\n"
        f"  search:\n    searxng_url: {site.url('')}\n"
    )
    workspace(home)
    pending: list[ScriptedCall] = []

    def answer(body: dict[str, Any]) -> Reply:
        calls = take_pending(pending, body)
        return Reply(tool_calls=calls) if calls else text("done")

    toolsets = ",".join(dict.fromkeys(tool.toolset for tool in builtin_tools()))
    with ScriptedProvider(script=Script(fallback=answer)) as server:
        workers.append(WorkerProcess(temporal_target, queue, server, home, toolsets=toolsets))
        client = await connect(temporal_target)
        for mode in MODES:
            generated = _generated(site)
            pending.extend(ScriptedCall(name, as_json(g.arguments)) for name, g in generated)
            overrides = {"api_mode": mode, "base_url": base_url(server, mode)}
            turn = await start_turn(client, queue, PROMPT, agent=overrides, answers=True)
            follower = _Client(turn)
            result = await turn.follow(follower.on_event)
            assert server.invalid_requests == []
            check_turn(
                result, follower.events, " ".join(as_json(g.arguments) for _, g in generated)
            )
            contents = [m["content"] for m in result["messages"] if m["role"] == "tool"]
            assert len(contents) == len(generated)
            for (name, call), content in zip(generated, contents, strict=True):
                check_answer(name, call, content)
            ran = {name for (name, _), content in zip(generated, contents, strict=True)
                   if not content.startswith("Error: unknown tool")}  # fmt: skip
            assert ran == set(REGISTERED), mode
