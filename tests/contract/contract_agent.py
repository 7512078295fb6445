"""One real Agent per API mode on the scripted HTTP provider, that makes whatever tool call a
contract test hands it and checks what the model and the user got back.

The scripted model answers the turn's prompt with the pending call and everything else
(the turn's second request, a delegated child's request) with "done", so one agent runs any
number of generated calls, each in a fresh session.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from schema_calls import GeneratedCall, as_json, leaks

from helpers import base_url
from talaria import Agent
from talaria.events import Event
from talaria.testing import Reply, Script, ScriptedCall, ScriptedProvider, text

PROMPT = "contract call: make the pending tool call"
ECHOES = {"ToolStarted", "ToolCallGenerated", "ApprovalRequested"}
"""Events that echo the model's own arguments back (only their names and reasons count)."""


class ContractAgent:
    """An agent whose model makes the calls it is given; see the module doc."""

    def __init__(self, server: ScriptedProvider, agent: Agent) -> None:
        self.server = server
        self.agent = agent
        self.pending: list[ScriptedCall] = []
        self.events: list[dict[str, Any]] = []
        self.covered: set[str] = set()
        """Tools that ran at least once (the call reached the tool, valid or not)."""
        agent.subscribe(self._record)

    def _record(self, event: Event) -> None:
        fields = dataclasses.asdict(event)  # type: ignore[call-overload]
        self.events.append({"type": type(event).__name__, **fields})

    def answer(self, body: dict[str, Any]) -> Reply:
        calls = take_pending(self.pending, body)
        return Reply(tool_calls=calls) if calls else text("done")

    def run(self, name: str, generated: GeneratedCall) -> str:
        """Make one call in a fresh session; the tool's result, after every check passed."""
        self.pending = [ScriptedCall(name, as_json(generated.arguments))]
        self.events.clear()
        self.agent.new_session()
        result = self.agent.run_conversation(PROMPT)
        assert self.server.invalid_requests == []
        (content,) = [m["content"] for m in result["messages"] if m["role"] == "tool"]
        check_turn(result, self.events, as_json(generated.arguments))
        check_answer(name, generated, content)
        if not content.startswith(f"Error: unknown tool {name!r}"):
            self.covered.add(name)
        return str(content)


def take_pending(pending: list[ScriptedCall], body: dict[str, Any]) -> list[ScriptedCall]:
    """The pending calls when `body` is the request that answers the contract prompt (then
    none are pending any more), else none: a turn's later requests and a child's get text."""
    last = (body.get("messages") or body.get("input") or [{}])[-1]
    if PROMPT not in json.dumps(last):
        return []
    calls = list(pending)
    pending.clear()
    return calls


def check_turn(result: dict[str, Any], events: list[dict[str, Any]], sent: str) -> None:
    """The turn went on after the calls, and nothing internal reached the model or the user
    (`sent`: the arguments as the model sent them, which may say anything)."""
    assert result["completed"] and result["final_response"] == "done", result.get("error")
    for message in result["messages"]:
        content = message.get("content")
        assert not leaks(content if isinstance(content, str) else json.dumps(content), sent)
    assert not leaks(str(result.get("error") or ""))
    for event in events:
        if event["type"] in ECHOES:
            event = {k: v for k, v in event.items() if k in ("type", "name", "tool_name", "reason")}
        assert not leaks(json.dumps(event, default=str), sent), event


def check_answer(name: str, generated: GeneratedCall, content: str) -> None:
    """Wrong input is refused with a message naming each broken argument and what it needs."""
    refused = content.startswith(f"Error: invalid arguments for {name}:")
    if generated.valid:
        return
    assert refused, f"{generated.arguments!r} was accepted: {content[:300]}"
    for argument, words in generated.expected:
        assert f"`{argument}`" in content and words in content, (argument, words, content)


@contextmanager
def contract_agent(mode: str, home: Path, **kwargs: Any) -> Iterator[ContractAgent]:
    answering: list[ContractAgent] = []
    script = Script(fallback=lambda body: answering[0].answer(body))
    with ScriptedProvider(script=script) as server:
        agent = Agent(
            model="scripted-model",
            api_key="test-key",
            base_url=base_url(server, mode),
            api_mode=mode,
            home=home,
            cwd=home / "work",
            config={"context.engine": "none", **kwargs.pop("config", {})},
            **kwargs,
        )
        contract = ContractAgent(server, agent)
        answering.append(contract)
        with agent:
            yield contract
