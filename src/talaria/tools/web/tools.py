"""The `web` toolset: `web_fetch` and `web_search`, built for one agent's `web.*` settings.

The tools are made per agent (their approval rule and the search backend come from its
settings) and import nothing heavy until called, so offering them costs nothing at startup.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any
from urllib.parse import urlsplit

from talaria.tools.base import Tool, ToolContext, ToolError
from talaria.tools.decorator import tool
from talaria.tools.web.addresses import Resolver, system_resolve
from talaria.tools.web.settings import WebSettings

CACHED_PAGES = 32
"""Pages kept per agent (for the session that fetched them)."""
DEFAULT_MAX_CHARS = 40_000


def web_tools(settings: WebSettings, resolve: Resolver = system_resolve) -> list[Tool]:
    """`web_fetch` and `web_search` (the latter offered only with a search backend)."""
    from talaria.tools.web.search import search_tool

    return [fetch_tool(settings, resolve), search_tool(settings)]


def fetch_tool(settings: WebSettings, resolve: Resolver = system_resolve) -> Tool:
    cache: OrderedDict[tuple[str, str], str] = OrderedDict()

    async def web_fetch(url: str, ctx: ToolContext, max_chars: int = DEFAULT_MAX_CHARS) -> str:
        """Fetch a web page (or PDF) and return its main content as markdown, links kept.

        Args:
            url: The absolute http:// or https:// URL to fetch.
            max_chars: Return at most this many characters of the page (minimum 100).
        """
        refuse_without_network(ctx)
        key = (ctx.session_id, url)
        text = cache.get(key)
        if text is None:
            from talaria.tools.web.fetch import fetch_page
            from talaria.tools.web.readable import readable_text

            page = await fetch_page(url, settings, resolve)
            text = readable_text(page)
            if page.url != url:
                text = f"(redirected to {page.url})\n\n{text}"
            cache[key] = text
            while len(cache) > CACHED_PAGES:
                cache.popitem(last=False)
        cache.move_to_end(key)
        return _cut(text, max(100, max_chars))

    made = tool(toolset="web", retry_safe=True)(web_fetch)
    made.parameters["properties"]["max_chars"]["minimum"] = 100
    if settings.ask_unknown:
        made.assess = lambda arguments, cwd, home: assess_domain(arguments, settings)
    return made


def refuse_without_network(ctx: ToolContext) -> None:
    """The web tools follow the sandbox's network setting: with the sandbox on and
    `sandbox.network: false`, nothing leaves the machine."""
    sandbox = ctx.sandbox
    if sandbox is not None and sandbox.confines and not sandbox.network:
        raise ToolError(
            "refused: the sandbox has no network (sandbox.network: false); "
            "set sandbox.network: true to let the web tools reach the web"
        )


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return (
        text[:max_chars]
        + f"\n\n[... {len(text) - max_chars:,} more characters; call again with a larger "
        "max_chars to read them]"
    )


def assess_domain(
    arguments: dict[str, Any],
    settings: WebSettings,
    tool: str = "web_fetch",
    verb: str = "fetch from",
) -> Any:
    """A yes from the user for a domain outside `web.allow` (asked per domain; an "always"
    answer remembers the domain), as `<tool> <host>`."""
    from talaria.policy.approval import Assessment

    url = arguments.get("url")
    try:
        host = (urlsplit(str(url)).hostname or "").rstrip(".")
    except ValueError:
        return None  # the fetch itself says what is wrong with the URL
    if not host or settings.known(host) or settings.denied(host):
        return None
    command = f"{tool} {host}"
    return Assessment(command, f"{verb} {host}, a domain outside web.allow", command)
