"""The `browser` toolset: navigate, snapshot, click, type, scroll, screenshot, console, tabs.

Built per agent (its `browser.*` and `web.*` settings); nothing heavy is imported until the
first call, which starts the session's browser. Actions answer with the page they leave
behind (a snapshot), so a model rarely needs a separate `browser_snapshot`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal

from talaria.tools.base import Tool, ToolContext, ToolError
from talaria.tools.decorator import tool
from talaria.tools.web.addresses import Resolver, system_resolve
from talaria.tools.web.settings import WebSettings
from talaria.tools.web.tools import assess_domain

if TYPE_CHECKING:
    from talaria.tools.browser.page import Tab
    from talaria.tools.browser.session import Browser
    from talaria.tools.browser.settings import BrowserSettings

DEFAULT_MAX_CHARS = 20_000
DOWNLOADS = "downloads"
"""The workspace folder downloads land in."""


def browser_tools(
    web: WebSettings, settings: BrowserSettings, resolve: Resolver = system_resolve
) -> list[Tool]:
    def installed() -> bool:  # asked only when the toolset is chosen
        from talaria.tools.browser.chromium import find_chromium

        return find_chromium(settings.executable) is not None

    async def use(ctx: ToolContext, work: Callable[[Browser], Awaitable[str]]) -> str:
        """Run `work` with the session's browser, on the loop the browser lives on."""
        from talaria.tools.browser.session import BROWSERS, on_browser_loop
        from talaria.tools.web.tools import refuse_without_network

        refuse_without_network(ctx)

        async def run() -> str:
            browser = await BROWSERS.of(ctx.session_id, settings, web, resolve)
            read_only = ctx.sandbox is not None and ctx.sandbox.mode == "read-only"
            await browser.allow_downloads(None if read_only else ctx.cwd / DOWNLOADS)
            return await work(browser)

        return await on_browser_loop(run())

    async def browser_navigate(
        url: str, ctx: ToolContext, max_chars: int = DEFAULT_MAX_CHARS
    ) -> str:
        """Open a URL in the browser's current tab; returns the page as a snapshot with
        element refs (e.g. e12) for browser_click and browser_type.

        Args:
            url: The absolute http:// or https:// URL to open.
            max_chars: Return at most this many characters of the snapshot (minimum 100).
        """
        from talaria.tools.web.fetch import target

        host = target(url, web)[1].lower().rstrip(".")

        async def go(browser: Browser) -> str:
            if ctx.approved:
                browser.proxy.allowed_hosts.add(host)
            tab = await browser.tab()
            await browser.open(tab, url.strip(), settings.timeout)
            return await _report(browser, tab, "", max_chars)

        return await use(ctx, go)

    async def browser_snapshot(ctx: ToolContext, max_chars: int = DEFAULT_MAX_CHARS) -> str:
        """The current page as an outline of roles, names and states, each element with a
        ref (e.g. e12) that browser_click and browser_type take; refs stay the same while
        the page lasts.

        Args:
            max_chars: Return at most this many characters of the snapshot (minimum 100).
        """

        async def look(browser: Browser) -> str:
            return await _report(browser, await browser.tab(), "", max_chars)

        return await use(ctx, look)

    async def browser_click(ref: str, ctx: ToolContext, max_chars: int = DEFAULT_MAX_CHARS) -> str:
        """Click an element of the current page, by its ref from the latest snapshot; returns
        the page after the click.

        Args:
            ref: The element's ref, e.g. e12.
            max_chars: Return at most this many characters of the snapshot (minimum 100).
        """

        async def click(browser: Browser) -> str:
            tab = await browser.tab()
            label = tab.label(ref)
            await tab.click(ref)
            await tab.settle(settings.timeout)
            return await _report(browser, tab, f"Clicked {ref} ({label}).", max_chars)

        return await use(ctx, click)

    async def browser_type(
        ref: str,
        text: str,
        ctx: ToolContext,
        submit: bool = False,
        clear: bool = True,
        max_chars: int = DEFAULT_MAX_CHARS,
    ) -> str:
        """Type text into a field of the current page (by its ref); returns the page after.

        Args:
            ref: The field's ref from the latest snapshot, e.g. e7.
            text: The text to type.
            submit: Press Enter afterwards (submits most forms).
            clear: Empty the field first (false: add to what it holds).
            max_chars: Return at most this many characters of the snapshot (minimum 100).
        """

        async def type_in(browser: Browser) -> str:
            tab = await browser.tab()
            label = tab.label(ref)
            await tab.type(ref, text, clear=clear, submit=submit)
            if submit:
                await tab.settle(settings.timeout)
            done = f"Typed {len(text)} characters into {ref} ({label})"
            return await _report(browser, tab, done + (" and pressed Enter." if submit else "."),
                                 max_chars)  # fmt: skip

        return await use(ctx, type_in)

    async def browser_scroll(
        ctx: ToolContext, direction: Literal["down", "up"] = "down", pages: float = 1.0
    ) -> str:
        """Scroll the current page by screens (to reach content a snapshot lists is not
        needed: click and type scroll to their element themselves).

        Args:
            direction: down or up.
            pages: How many screen heights (0.1 to 20).
        """

        async def scroll(browser: Browser) -> str:
            tab = await browser.tab()
            amount = max(0.1, min(pages, 20.0)) * (1 if direction == "down" else -1)
            return await tab.scroll(amount)

        return await use(ctx, scroll)

    async def browser_screenshot(ctx: ToolContext, full_page: bool = False) -> str:
        """A PNG screenshot of the current page, shown to you as an image when you can see
        images (else its saved path).

        Args:
            full_page: The whole page, not only the visible part (up to 8000 pixels tall).
        """
        from talaria.messages.media import MAX_IMAGE_BYTES, save_image

        async def shoot(browser: Browser) -> str:
            tab = await browser.tab()
            raw = await tab.screenshot(full_page)
            url, title = await tab.location()
            if len(raw) > MAX_IMAGE_BYTES:
                raise ToolError("the screenshot is over 5 MB: take it without full_page")
            return (
                f"Screenshot of {title or url} ({url}).\n{save_image(raw, 'image/png', ctx.home)}"
            )

        return await use(ctx, shoot)

    async def browser_console(ctx: ToolContext, everything: bool = False) -> str:
        """The current tab's console messages, uncaught errors, failed requests and requests
        the web rules refused, since the last look.

        Args:
            everything: All that is kept (the last 200 lines), not only what is new.
        """

        async def read(browser: Browser) -> str:
            tab = await browser.tab()
            lines = tab.read_log(everything)
            return "\n".join(lines) if lines else "No new console messages or errors."

        return await use(ctx, read)

    async def browser_tabs(
        ctx: ToolContext,
        action: Literal["list", "new", "switch", "close"] = "list",
        tab: int | None = None,
        url: str | None = None,
    ) -> str:
        """List the browser's tabs, open a new one (optionally at a URL), switch to one or
        close one; tabs are numbered from 1 as `list` shows them.

        Args:
            action: list, new, switch or close.
            tab: The tab number, for switch and close.
            url: For new: the http:// or https:// URL to open in it.
        """
        from talaria.tools.web.fetch import target

        if url:
            target(url, web)
        if action in ("switch", "close") and tab is None:
            raise ToolError(f"{action} needs the tab's number (browser_tabs list shows them)")

        async def tabs(browser: Browser) -> str:
            if action == "new":
                opened = await browser.new_tab()
                if url:
                    await browser.open(opened, url.strip(), settings.timeout)
            elif action == "switch":
                await browser.switch(int(tab or 0))
            elif action == "close":
                await browser.close_tab(int(tab or 0))
            return await _tab_list(browser)

        return await use(ctx, tabs)

    made: list[Tool] = [
        tool(toolset="browser", check=installed)(handler)
        for handler in (browser_navigate, browser_snapshot, browser_click, browser_type,
                        browser_scroll, browser_screenshot, browser_console, browser_tabs)
    ]  # fmt: skip
    for each in made:
        limit = each.parameters["properties"].get("max_chars")
        if limit is not None:
            limit["minimum"] = 100
    if web.ask_unknown:
        made[0].assess = lambda arguments, cwd, home: assess_domain(
            arguments, web, "browser_navigate", "open"
        )
    pages = made[4].parameters["properties"]["pages"]
    pages.update(minimum=0.1, maximum=20)
    made[7].parameters["properties"]["tab"].update(minimum=1)
    return made


async def _report(browser: Browser, tab: Tab, headline: str, max_chars: int) -> str:
    url, title = await tab.location()
    parts = [headline] if headline else []
    parts.append(f"Page: {title or '(untitled)'} ({url})")
    downloads = browser.take_downloads()
    if downloads:
        parts.append("Downloads: " + ", ".join(downloads))
    if tab.new_refusals:
        parts.append("\n".join(tab.new_refusals))
        tab.new_refusals = []
    snapshot = await tab.snapshot()
    limit = max(100, max_chars)
    if len(snapshot) > limit:
        snapshot = snapshot[:limit] + f"\n[... {len(snapshot) - limit:,} more characters]"
    return "\n".join(parts) + "\n\n" + snapshot


async def _tab_list(browser: Browser) -> str:
    await browser.refresh()
    lines = []
    for number, each in enumerate(browser.tabs, 1):
        mark = "*" if each is browser.current else " "
        lines.append(f"{mark}{number}. {each.title or '(untitled)'} ({each.url})")
    return "\n".join(lines) or "No tabs."
