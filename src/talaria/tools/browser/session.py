"""One browser per session: started by the session's first browser call, closed with the
session (`talaria.tools.session_end`), and on any exit of this process (see `chromium`).

The browser's connection and guard proxy live on the process's shared loop
(`talaria.background`), whatever loop the agent runs on, so an agent that runs a turn at a
time from plain code keeps its browser between turns.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from talaria.background import shared_loop
from talaria.tools.base import ToolError
from talaria.tools.browser.cdp import Connection
from talaria.tools.browser.chromium import Chromium, find_chromium
from talaria.tools.browser.guard import GuardProxy
from talaria.tools.browser.page import Tab, new_refs
from talaria.tools.browser.settings import BrowserSettings
from talaria.tools.session_end import on_continue, on_session_end
from talaria.tools.web.addresses import Resolver
from talaria.tools.web.settings import WebSettings

T = TypeVar("T")


class Browser:
    """A Chromium, its tabs, its downloads and the guard proxy in front of it."""

    def __init__(self, chromium: Chromium, connection: Connection, proxy: GuardProxy) -> None:
        self.chromium = chromium
        self.connection = connection
        self.proxy = proxy
        self.tabs: list[Tab] = []
        self.current: Tab | None = None
        self.downloads: list[str] = []
        self._refs = new_refs()
        self._download_names: dict[str, str] = {}
        self._closed: set[str] = set()
        self._downloads_set = False
        self.download_dir: Path | None = None
        connection.listeners.append(self._on_event)

    @classmethod
    async def launch(
        cls, settings: BrowserSettings, web: WebSettings, resolve: Resolver
    ) -> Browser:
        executable = find_chromium(settings.executable)
        if executable is None:
            raise ToolError("no Chromium is installed (set browser.executable to one)")
        proxy = GuardProxy(web, resolve)
        port = await proxy.start()
        try:
            chromium = await Chromium.start(executable, port, headless=settings.headless)
        except BaseException:
            proxy.close()
            raise
        try:
            connection = await Connection.open(chromium.websocket_url)
        except BaseException:
            proxy.close()
            chromium.stop()
            raise
        proxy.protected_ports.add(int(chromium.websocket_url.split(":")[2].split("/")[0]))
        browser = cls(chromium, connection, proxy)
        await connection.send("Target.setDiscoverTargets", {"discover": True})
        pages = await connection.send("Target.getTargets")
        for info in pages.get("targetInfos", []):
            browser._add(info)
        if not browser.tabs:
            await browser.new_tab()
        browser.current = browser.tabs[0]
        await browser.current.attach()
        return browser

    async def allow_downloads(self, folder: Path | None) -> None:
        """Downloads land in `folder` (made on the first one), or nowhere when it is None (a
        read-only sandbox: the workspace may not be written)."""
        if folder == self.download_dir and self._downloads_set:
            return
        self.download_dir, self._downloads_set = folder, True
        behavior: dict[str, Any] = {"behavior": "deny", "eventsEnabled": True}
        if folder is not None:
            behavior.update(behavior="allow", downloadPath=str(folder))
        await self.connection.send("Browser.setDownloadBehavior", behavior)

    async def tab(self) -> Tab:
        if self.current is None or self.current not in self.tabs:
            if not self.tabs:
                await self.new_tab()
            self.current = self.tabs[-1]
        await self.current.attach()
        return self.current

    async def new_tab(self) -> Tab:
        created = await self.connection.send("Target.createTarget", {"url": "about:blank"})
        tab = self._find(created["targetId"]) or self._add(
            {"targetId": created["targetId"], "type": "page", "url": "about:blank"}
        )
        if tab is None:
            raise ToolError("the new tab closed at once")
        self.current = tab
        await tab.attach()
        return tab

    async def refresh(self) -> None:
        """Bring every tab's URL and title up to date (pages change them as they load)."""
        found = await self.connection.send("Target.getTargets")
        for info in found.get("targetInfos", []):
            self._add(info)

    async def switch(self, index: int) -> Tab:
        tab = self._numbered(index)
        self.current = tab
        await tab.attach()
        await self.connection.send("Target.activateTarget", {"targetId": tab.target_id})
        return tab

    async def close_tab(self, index: int) -> None:
        tab = self._numbered(index)
        self._closed.add(tab.target_id)
        await self.connection.send("Target.closeTarget", {"targetId": tab.target_id})
        if tab in self.tabs:
            self.tabs.remove(tab)
        if self.current is tab:
            self.current = self.tabs[-1] if self.tabs else None

    def _numbered(self, index: int) -> Tab:
        if not 1 <= index <= len(self.tabs):
            raise ToolError(f"no tab {index}: there are {len(self.tabs)} (browser_tabs list)")
        return self.tabs[index - 1]

    def _find(self, target_id: str) -> Tab | None:
        return next((tab for tab in self.tabs if tab.target_id == target_id), None)

    def _add(self, info: dict[str, Any]) -> Tab | None:
        tab = self._find(info["targetId"])
        if tab is None and info.get("type") == "page" and info["targetId"] not in self._closed:
            tab = Tab(self.connection, info["targetId"], self._refs, self.proxy.why_refused)
            self.tabs.append(tab)
        if tab is not None:
            tab.url, tab.title = info.get("url", tab.url), info.get("title", tab.title)
        return tab

    def _on_event(self, method: str, params: dict[str, Any], session: str | None) -> None:
        if session is not None:
            tab = next((tab for tab in self.tabs if tab.session == session), None)
            if tab is not None:
                tab.on_event(method, params)
            return
        info = params.get("targetInfo", {})
        if method in ("Target.targetCreated", "Target.targetInfoChanged"):
            if info.get("type") == "page":
                self._add(info)
        elif method == "Target.targetDestroyed":
            tab = self._find(params.get("targetId", ""))
            if tab is not None:
                self.tabs.remove(tab)
        elif method == "Browser.downloadWillBegin":
            self._download_names[params.get("guid", "")] = params.get("suggestedFilename", "")
        elif method == "Browser.downloadProgress" and params.get("state") == "completed":
            name = self._download_names.pop(params.get("guid", ""), "")
            if self.download_dir is not None:
                self.downloads.append(str(self.download_dir / name))
        elif method == "Browser.downloadProgress" and params.get("state") == "canceled":
            name = self._download_names.pop(params.get("guid", ""), "")
            why = "the sandbox is read-only" if self.download_dir is None else "canceled"
            self.downloads.append(f"{name} not saved ({why})")

    async def open(self, tab: Tab, url: str, timeout: float) -> None:
        """Navigate `tab` to `url`, refused at once (with the reason) when the web rules
        refuse the URL itself; a refused redirect or part of the page is in its log."""
        await self.proxy.check(url)
        await tab.navigate(url, timeout)

    def take_downloads(self) -> list[str]:
        done, self.downloads = self.downloads, []
        return done

    def close(self) -> None:
        """End Chromium and the proxy; safe from any thread, and more than once."""
        self.chromium.stop()
        loop = shared_loop()
        with contextlib.suppress(RuntimeError):  # the loop closed first (at exit)
            loop.call_soon_threadsafe(self.proxy.close)
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self.connection.close()))


class Browsers:
    """The browser of each session that has one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, Browser] = {}
        self._starting: dict[str, asyncio.Future[Browser]] = {}
        atexit.register(self.close_all)
        on_continue(self._move)

    async def of(
        self, session: str, settings: BrowserSettings, web: WebSettings, resolve: Resolver
    ) -> Browser:
        """The session's browser, started on first use (one start, however many ask)."""
        browser = self._open.get(session)
        if browser is not None and not browser.connection.closed:
            return browser
        starting = self._starting.get(session)
        if starting is None:
            starting = asyncio.ensure_future(Browser.launch(settings, web, resolve))
            self._starting[session] = starting
        try:
            browser = await asyncio.shield(starting)
        finally:
            self._starting.pop(session, None)
        with self._lock:
            self._open[session] = browser
        on_session_end(session, lambda: self.discard(browser))
        return browser

    def discard(self, browser: Browser) -> None:
        """Close `browser` and forget it, whichever session has it now."""
        with self._lock:
            for session in [key for key, open_ in self._open.items() if open_ is browser]:
                del self._open[session]
        browser.close()

    def _move(self, previous: str, new: str) -> None:
        with self._lock:
            browser = self._open.pop(previous, None)
            if browser is not None:
                self._open[new] = browser

    def close_all(self) -> None:
        for browser in list(self._open.values()):
            self.discard(browser)


BROWSERS = Browsers()


async def on_browser_loop(work: Coroutine[Any, Any, T]) -> T:
    """Run `work` on the shared loop, where the browsers live, from whichever loop asks."""
    loop = shared_loop()
    if asyncio.get_running_loop() is loop:
        return await work
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, loop))
