"""web_search against a loopback SearXNG stand-in (its JSON format), through a real Agent: the
results come back as title, URL and snippet; without a configured backend the tool is not
offered at all (never a made-up result); a backend that refuses JSON says how to fix it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import scripted_agent, tool_results
from talaria.testing import ScriptedProvider, call, text
from web_support import WebSite, web_site

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def site() -> Iterator[WebSite]:
    with web_site() as running:
        yield running


def search(home: Path, calls: list[dict[str, Any]], config: dict[str, Any]) -> list[str]:
    script = [*(call("web_search", arguments) for arguments in calls), text("found")]
    with ScriptedProvider(script) as server:
        agent = scripted_agent(server, home, tools=[], toolsets=["web"], config=config)
        return tool_results(agent.run_conversation("search"))


def test_results_are_title_url_and_snippet(tmp_path: Path, site: WebSite) -> None:
    config = {"web.search.searxng_url": site.url("/"), "sandbox.network": True}
    (results,) = search(tmp_path, [{"query": "tide tables", "limit": 2}], config)
    assert results == (
        "1. Tide tables explained\n   https://tides.example/explained\n"
        "   How to read a tide table, with examples.\n\n"
        "2. Spring and neap tides\n   https://tides.example/spring-neap\n"
        "   Why the range changes over a month."
    )
    assert site.queries == [{"q": ["tide tables"], "format": ["json"]}]


def test_without_a_backend_the_tool_is_not_offered(tmp_path: Path) -> None:
    (answer,) = search(tmp_path, [{"query": "tides"}], {"sandbox.network": True})
    assert answer.startswith("Error: unknown tool 'web_search'")


def test_a_backend_without_json_or_network_is_an_error_saying_why(
    tmp_path: Path, site: WebSite
) -> None:
    no_json = {"web.search.searxng_url": site.url("/no-json"), "sandbox.network": True}
    (refused,) = search(tmp_path, [{"query": "tides"}], no_json)
    assert refused == (
        "Error: the search backend answered HTTP 403 (enable the json format in its settings.yml)"
    )
    (offline,) = search(
        tmp_path / "b", [{"query": "tides"}], {"web.search.searxng_url": site.url("/")}
    )
    assert offline.startswith("Error: refused: the sandbox has no network")
    assert site.queries == []
