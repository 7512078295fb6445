"""The tool contract for adapted MCP tools: every tool of the real
`@modelcontextprotocol/server-everything` (one server over streamable HTTP for the module),
called with arguments generated from the schema it announces, in all three API modes. The
same checks as the built-in tools' (see test_builtin_tool_contract.py): the turn goes on,
nothing internal reaches the model or the user, wrong input is named."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from contract_agent import ContractAgent, contract_agent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schema_calls import GeneratedCall, calls

from helpers import MODES
from mcp_support import everything_http

pytestmark = [pytest.mark.npm, pytest.mark.timeout(300)]

EXAMPLES = 5
PREFIX = "mcp__everything__"

HINTS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "trigger-long-running-operation": {
        "duration": st.sampled_from([0, 0.01, 0.05]),
        "steps": st.sampled_from([1, 2]),
    },
    "gzip-file-as-resource": {
        "data": st.sampled_from(["data:text/plain;base64,aGVsbG8=", "not a uri", ""]),
    },
}
"""Valid values that keep a call fast and off the network (a URL the server would fetch)."""
QUICK = {"trigger-long-running-operation": {"duration": 0.01, "steps": 1}}
"""Arguments pinned so a call is quick (the operation runs 10 s when its duration is left
out); every other argument of the tool is still generated."""


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with everything_http() as url:
        yield url


@pytest.fixture(scope="module", params=MODES)
def contract(
    request: pytest.FixtureRequest, server_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ContractAgent]:
    home = tmp_path_factory.mktemp(f"mcp-contract-{request.param}")
    (home / "work").mkdir()
    servers = {"everything": {"url": server_url, "approval": "allow"}}
    with contract_agent(str(request.param), home, tools=[], mcp_servers=servers) as agent:
        assert agent.agent.chat("hello") == "done"  # the first turn connects the server
        yield agent


def _mcp_tools(contract: ContractAgent) -> dict[str, dict[str, Any]]:
    return {
        name.removeprefix(PREFIX): tool.parameters
        for name, tool in contract.agent.tools.items()
        if name.startswith(PREFIX)
    }


def _quick(name: str, generated: GeneratedCall) -> GeneratedCall:
    pinned = QUICK.get(name, {})
    return GeneratedCall(
        {**generated.arguments, **pinned},
        [problem for problem in generated.expected if problem[0] not in pinned],
    )


def test_every_tool_of_the_server_keeps_the_contract(contract: ContractAgent) -> None:
    tools = _mcp_tools(contract)
    assert len(tools) >= 10, sorted(tools)  # the server announced its tools
    for name, schema in sorted(tools.items()):
        _keeps_the_contract(contract, name, schema)
    assert {PREFIX + name for name in tools} <= contract.covered


def _keeps_the_contract(contract: ContractAgent, name: str, schema: dict[str, Any]) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(calls(schema, HINTS.get(name)).map(lambda generated: _quick(name, generated)))
    def check(generated: GeneratedCall) -> None:
        contract.run(PREFIX + name, generated)

    check()
