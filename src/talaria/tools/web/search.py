"""`web_search` over a configured search backend: a SearXNG instance's JSON API
(`web.search.searxng_url`). Without a backend the tool is not offered at all: a model must
never read made-up results.

The backend is the user's own choice of server, so it may live on a private address (a
SearXNG on the same machine is common); the address rules of `web_fetch` are for the pages a
model picks, not for it.
"""

from __future__ import annotations

import json
from typing import Any

from talaria.tools.base import Tool, ToolContext, ToolError
from talaria.tools.decorator import tool
from talaria.tools.web.settings import WebSettings

MAX_RESULTS = 20
_SNIPPET_CHARS = 400


def search_tool(settings: WebSettings) -> Tool:
    backend = settings.searxng_url

    async def web_search(query: str, ctx: ToolContext, limit: int = 5) -> str:
        """Search the web; returns results as title, URL and snippet, best first.

        Args:
            query: What to search for.
            limit: How many results to return (1 to 20).
        """
        from talaria.tools.web.tools import refuse_without_network

        refuse_without_network(ctx)
        if not query.strip():
            raise ToolError("query is empty: say what to search for")
        if backend is None:
            raise ToolError("no search backend is configured (web.search.searxng_url)")
        results = await _searxng(backend, query, settings.timeout)
        return _render(query, results[: max(1, min(limit, MAX_RESULTS))])

    made = tool(toolset="web", retry_safe=True, check=lambda: backend is not None)(web_search)
    made.parameters["properties"]["limit"].update(minimum=1, maximum=MAX_RESULTS)
    return made


async def _searxng(base_url: str, query: str, timeout: float) -> list[dict[str, Any]]:
    import httpx2

    endpoint = base_url.rstrip("/") + "/search"
    try:
        async with httpx2.AsyncClient(timeout=timeout) as client:
            response = await client.get(endpoint, params={"q": query, "format": "json"})
    except httpx2.HTTPError as exc:
        raise ToolError(
            f"the search backend cannot be reached: {exc or type(exc).__name__}"
        ) from None
    if response.status_code != 200:
        hint = (
            " (enable the json format in its settings.yml)" if response.status_code == 403 else ""
        )
        raise ToolError(f"the search backend answered HTTP {response.status_code}{hint}")
    try:
        results = json.loads(response.content).get("results")
    except (ValueError, AttributeError):
        raise ToolError("the search backend did not answer with SearXNG's JSON") from None
    if not isinstance(results, list):
        raise ToolError("the search backend did not answer with SearXNG's JSON")
    return [item for item in results if isinstance(item, dict) and item.get("url")]


def _render(query: str, results: list[dict[str, Any]]) -> str:
    if not results:
        return f"No results for {query!r}."
    blocks = []
    for number, item in enumerate(results, 1):
        title = " ".join(str(item.get("title") or "(no title)").split())
        snippet = " ".join(str(item.get("content") or "").split())[:_SNIPPET_CHARS]
        blocks.append(
            f"{number}. {title}\n   {item['url']}" + (f"\n   {snippet}" if snippet else "")
        )
    return "\n\n".join(blocks)
