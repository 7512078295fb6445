"""The tool contract, for every built-in and agent tool in all three API modes: calls generated
from the tool's own schema (every argument absent, valid, at its bounds, wrong-typed, null) go
through a real Agent and the scripted HTTP provider, and

- the turn always goes on: nothing a call does fails or hangs it;
- no internal error (an exception class name, a traceback, a module path) reaches the model
  (the tool result) or the user (events, the final result);
- wrong input is refused before anything runs, with a message naming the argument and what it
  needs.

The tools come from the registry, so a new tool is covered without a line here; hints only
keep free-text arguments safe to run (a shell command, a path) and are optional.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from contract_agent import ContractAgent, contract_agent
from contract_hints import HINTS, REGISTERED, web_config, web_hints, workspace
from hypothesis import HealthCheck, given, settings
from schema_calls import GeneratedCall, calls

from helpers import MODES
from talaria.agent_tools.catalog import TOOLSETS, builtin_tools
from web_support import WebSite, web_site

pytestmark = pytest.mark.timeout(300)

EXAMPLES = 10
BROWSER_EXAMPLES = 4
"""Each call is a fresh session, so each browser call starts a Chromium (about a second)."""


@pytest.fixture(scope="module")
def site() -> Iterator[WebSite]:
    with web_site() as running:
        yield running


@pytest.fixture(scope="module", params=MODES)
def contract(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, site: WebSite
) -> Iterator[ContractAgent]:
    home = tmp_path_factory.mktemp(f"contract-{request.param}")
    workspace(home / "work")
    with contract_agent(
        str(request.param),
        home,
        toolsets=list(TOOLSETS),
        approval_callback=lambda request: "deny",
        clarify_callback=lambda question, choices: "yes",
        config={"delegation.max_iterations": 2, "approvals.timeout": 5, **web_config(site)},
    ) as agent:
        yield agent


def test_every_registered_tool_is_offered_and_generated(contract: ContractAgent) -> None:
    """A tool the contract agent does not offer would be 'covered' by unknown-tool errors."""
    contract.agent.warm_up()
    assert set(REGISTERED) <= set(contract.agent.tools)
    assert set(HINTS) <= set(REGISTERED), "a hint names a tool that no longer exists"


@pytest.mark.parametrize("name", REGISTERED)
def test_generated_calls_keep_the_contract(
    contract: ContractAgent, site: WebSite, name: str
) -> None:
    schema = next(tool for tool in builtin_tools() if tool.name == name).parameters
    hints = {**HINTS, **web_hints(site)}.get(name)

    @settings(
        max_examples=BROWSER_EXAMPLES if name.startswith("browser_") else EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(calls(schema, hints))
    def check(generated: GeneratedCall) -> None:
        contract.run(name, generated)

    check()
    assert name in contract.covered
