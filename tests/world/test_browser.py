"""The browser toolset against a loopback site in a real headless Chromium: a form filled,
submitted by a click and read back; a screenshot that reaches a seeing model as an image;
console errors; tabs; a download landing in the workspace; and the web rules held for
navigations, redirects and what a page's own script fetches. The browser is closed with the
session, and never outlives talaria, even when it is killed."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_support import CHROMIUM
from helpers import images_sent, scripted_agent, tool_results
from talaria.testing import Script, ScriptedProvider, call, text
from talaria.tools.base import Tool, ToolContext, ToolError
from talaria.tools.browser.settings import BrowserSettings
from talaria.tools.browser.tools import browser_tools
from talaria.tools.web.settings import WebSettings
from web_support import WebSite, web_site

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

LOCAL = WebSettings(private_hosts=("localhost",))
"""The site is on loopback: the name `localhost` may be fetched there, nothing else."""


@pytest.fixture(autouse=True)
def chromium_installed() -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is required in CI (.ci/run installs it with apt)")
        pytest.skip("chromium is not installed")


@pytest.fixture(scope="module")
def site() -> Iterator[WebSite]:
    with web_site() as running:
        yield running


class Session:
    """The browser tools of one session, called as the executor calls them."""

    def __init__(self, work: Path, web: WebSettings = LOCAL, resolve: Any = None) -> None:
        made = browser_tools(web, BrowserSettings(), *([resolve] if resolve else []))
        self.tools = {t.name: t for t in made}
        self.ctx = ToolContext("task", f"session-{id(self)}", work, work, threading.Event(),
                               lambda event: None)  # fmt: skip

    def __call__(self, name: str, **arguments: Any) -> str:
        tool: Tool = self.tools[name]
        try:
            return str(asyncio.run(tool.handler(ctx=self.ctx, **arguments)))
        except ToolError as exc:  # as the executor gives it to the model
            return f"Error: {exc}"

    def close(self) -> None:
        from talaria.tools.session_end import end_session

        end_session(self.ctx.session_id)


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    opened = Session(tmp_path)
    yield opened
    opened.close()


def ref(snapshot: str, role: str, name: str) -> str:
    found = re.search(rf'{role} "{re.escape(name)}" \[ref=(e\d+)\]', snapshot)
    assert found, f"no {role} {name!r} in:\n{snapshot}"
    return found.group(1)


def test_fill_a_form_click_and_read_the_result(session: Session, site: WebSite) -> None:
    page = session("browser_navigate", url=site.url("/form", "localhost"))
    assert "Page: Harbour office" in page and 'heading "Book a mooring"' in page
    boat = ref(page, "textbox", "Boat name")
    typed = session("browser_type", ref=boat, text="Kestrel")
    assert f'textbox "Boat name" [ref={boat}] value="Kestrel"' in typed
    checkbox = ref(typed, "checkbox", "Longer than 12 m")
    assert f"[ref={checkbox}] checked" in session("browser_click", ref=checkbox)
    again = session("browser_snapshot")
    assert ref(again, "textbox", "Boat name") == boat  # the same element keeps its ref
    booked = session("browser_click", ref=ref(again, "button", "Book"))
    assert "Page: Booked" in booked and "greet?boat=Kestrel&long=on" in booked
    assert "Mooring booked for Kestrel." in booked
    missing = session("browser_click", ref=boat)  # from the page that was left
    assert "take a browser_snapshot" in missing


def test_typing_with_enter_submits(session: Session, site: WebSite) -> None:
    page = session("browser_navigate", url=site.url("/form", "localhost"))
    done = session("browser_type", ref=ref(page, "textbox", "Boat name"), text="Tern", submit=True)
    assert "Mooring booked for Tern." in done


def test_console_errors_and_failed_requests(session: Session, site: WebSite) -> None:
    session("browser_navigate", url=site.url("/console", "localhost"))
    session("browser_navigate", url=site.url("/missing", "localhost"))
    log = session("browser_console")
    assert "console.error: the tide is late" in log
    assert "no moon" in log
    assert "HTTP 404" in log and "/missing" in log
    assert session("browser_console") == "No new console messages or errors."
    assert "the tide is late" in session("browser_console", everything=True)


def test_tabs_open_switch_and_close(session: Session, site: WebSite) -> None:
    page = session("browser_navigate", url=site.url("/form", "localhost"))
    session("browser_click", ref=ref(page, "link", "Tide tables (new tab)"))
    for _ in range(100):  # the new tab loads on its own
        listed = session("browser_tabs")
        if "2. Tide tables" in listed:
            break
        time.sleep(0.05)
    assert "1. Harbour office" in listed and "2. Tide tables" in listed
    opened = session("browser_tabs", action="new", url=site.url("/greet?boat=Skua", "localhost"))
    assert "*3. Booked" in opened
    assert "*1. Harbour office" in session("browser_tabs", action="switch", tab=1)
    assert "Page: Harbour office" in session("browser_snapshot")
    closed = session("browser_tabs", action="close", tab=2)
    assert "Tide tables" not in closed and "2. Booked" in closed
    assert "no tab 7" in session("browser_tabs", action="switch", tab=7)


def test_a_download_lands_in_the_workspace(session: Session, site: WebSite, tmp_path: Path) -> None:
    page = session("browser_navigate", url=site.url("/form", "localhost"))
    session("browser_click", ref=ref(page, "link", "Download the tide table"))
    saved = tmp_path / "downloads" / "tides.csv"
    for _ in range(100):  # the click returns when the page settles; the file may follow
        if saved.exists():
            break
        time.sleep(0.05)
    assert saved.read_text() == "time,height\n06:12,4.1\n"


def test_scroll_and_a_screenshot(session: Session, site: WebSite, tmp_path: Path) -> None:
    session("browser_navigate", url=site.url("/article", "localhost"))
    assert "scrolled to" in session("browser_scroll", direction="down")
    shot = session("browser_screenshot", full_page=True)
    saved = Path(re.search(r"saved to (.+\.png)\]", shot).group(1))
    assert saved.read_bytes().startswith(b"\x89PNG") and saved.parent.is_relative_to(tmp_path)


def test_the_web_rules_hold_for_navigation_redirects_and_page_requests(
    session: Session, site: WebSite
) -> None:
    refused = session("browser_navigate", url=site.url("/form", "127.0.0.1"))
    assert "127.0.0.1" in refused and "private, loopback or link-local" in refused
    assert "http:// or https://" in session("browser_navigate", url="file:///etc/passwd")
    hop = session("browser_navigate", url=site.url("/to-metadata", "localhost"))
    assert "refused by the web rules: http://169.254.169.254/latest/meta-data/" in hop
    session("browser_navigate", url=site.url("/exfil", "localhost"))
    wanted = [f"refused by the web rules: {url}" for url in (
        "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/pixel.png",
        site.url("/secret"))]  # fmt: skip
    for _ in range(200):  # the page's script fetches after the load event
        log = session("browser_console", everything=True)
        if all(line in log for line in wanted):
            break
        time.sleep(0.05)
    assert all(line in log for line in wanted), log
    assert not [path for path, _ in site.requests if path == "/secret"]


def test_allow_and_deny_lists_refuse_a_domain(tmp_path: Path, site: WebSite) -> None:
    url = site.url("/form", "localhost")
    denied = Session(tmp_path, WebSettings(private_hosts=("localhost",), deny=("localhost",)))
    others = Session(tmp_path, WebSettings(private_hosts=("localhost",), allow=("example.org",)))
    try:
        assert "denied by web.deny" in denied("browser_navigate", url=url)
        assert others("browser_navigate", url=url) == "Error: localhost is not in web.allow"
    finally:
        denied.close()
        others.close()


SCRIPT_FORM = """
import asyncio, sys, threading
from pathlib import Path
from talaria.tools.base import ToolContext
from talaria.tools.browser.settings import BrowserSettings
from talaria.tools.browser.tools import browser_tools
from talaria.tools.web.settings import WebSettings

tools = {t.name: t for t in browser_tools(WebSettings(), BrowserSettings())}
ctx = ToolContext("t", "s", Path(sys.argv[1]), Path(sys.argv[1]), threading.Event(), print)
asyncio.run(tools["browser_tabs"].handler(ctx=ctx))
print("ready", flush=True)
sys.stdin.read()
"""


def _chromium_processes(profile_hint: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if profile_hint in command and "talaria-browser-" in command:
                found.append(int(entry.name))
    return found


def test_a_killed_talaria_leaves_no_browser_behind(tmp_path: Path) -> None:
    profiles: set[str | None] = set()
    runner = subprocess.Popen([sys.executable, "-c", SCRIPT_FORM, str(tmp_path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert runner.stdout is not None and runner.stdout.readline() == "ready\n"
        children = [pid for pid in _chromium_processes("--user-data-dir=")
                    if _parent_chain_has(pid, runner.pid)]  # fmt: skip
        assert children, "the browser did not start"
        profiles = {_profile(pid) for pid in children}
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
        for _ in range(400):  # Chromium notices its pipe closed and quits
            if not any(_alive(pid) for pid in children):
                break
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in children)
    finally:
        runner.kill()
        for profile in profiles - {None}:  # a killed talaria cannot remove the profile
            shutil.rmtree(str(profile), ignore_errors=True)


def _profile(pid: int) -> str | None:
    try:
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return None
    found = [a.split("=", 1)[1] for a in arguments if a.startswith("--user-data-dir=")]
    return found[0] if found else None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _parent_chain_has(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
    return False


def test_an_agent_browses_sees_the_screenshot_and_closes_the_browser(
    tmp_path: Path, site: WebSite
) -> None:
    """Through a real agent: the model finds the refs in the snapshots it is given."""

    def step(body: dict[str, Any]) -> Any:
        results = [m for m in body["messages"] if m.get("role") == "tool"]
        last = str(results[-1]["content"]) if results else ""
        if not results:
            return call("browser_navigate", {"url": site.url("/form", "localhost")})
        if len(results) == 1:
            return call("browser_type", {"ref": ref(last, "textbox", "Boat name"),
                                         "text": "Petrel", "submit": True})  # fmt: skip
        if len(results) == 2:
            return call("browser_screenshot", {})
        return text("booked")

    with ScriptedProvider(script=Script(fallback=step)) as server:
        config = {"web.allow_private": ["localhost"], "sandbox.network": True}
        agent = scripted_agent(server, tmp_path, tools=[], toolsets=["browser"], config=config)
        result = agent.run_conversation("book a mooring for Petrel")
        _, booked, _ = tool_results(result)
        assert "Mooring booked for Petrel." in booked
        assert images_sent(server.requests[-1].body)[0].startswith(b"\x89PNG")
        browsers = [pid for pid in _chromium_processes("--user-data-dir=")
                    if _parent_chain_has(pid, os.getpid())]  # fmt: skip
        assert browsers
        agent.close()
    assert not any(_alive(pid) for pid in browsers)


def test_a_read_only_sandbox_takes_no_downloads(tmp_path: Path, site: WebSite) -> None:
    from talaria.tools.sandbox import SandboxPolicy

    session = Session(tmp_path)
    session.ctx.sandbox = SandboxPolicy(mode="read-only", network=True)
    try:
        page = session("browser_navigate", url=site.url("/form", "localhost"))
        clicked = session("browser_click", ref=ref(page, "link", "Download the tide table"))
        for _ in range(100):  # the click returns when the page settles; the refusal may follow
            if "not saved" in clicked:
                break
            time.sleep(0.05)
            clicked = session("browser_snapshot")
        assert "Downloads: tides.csv not saved (the sandbox is read-only)" in clicked
        assert not (tmp_path / "downloads").exists()
    finally:
        session.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "0.0.0.0", "[::ffff:127.0.0.1]"])
def test_the_browsers_own_ports_are_never_reached_even_with_private_allowed(host: str) -> None:
    """With `web.allow_private: true` a page may reach loopback, but never the browser's
    DevTools port or the guard proxy itself (either would hand it the browser)."""
    from talaria.tools.browser.guard import GuardProxy
    from talaria.tools.web.addresses import system_resolve

    guard = GuardProxy(WebSettings(allow_private=True), system_resolve)
    guard.protected_ports.add(9222)
    with pytest.raises(ToolError, match="control ports"):
        asyncio.run(guard.check(f"http://{host}:9222/json/version"))
    assert asyncio.run(guard.check(f"http://{host}:9223/"))[1] == 9223  # other ports: allowed


def test_the_users_proxy_is_used_after_the_check(
    tmp_path: Path, site: WebSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As with web_fetch: the name is checked here, then the user's proxy is asked for it."""

    async def public(host: str, port: int) -> list[str]:
        return ["8.8.8.8"]  # never connected to: the proxy is

    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{site.port}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    session = Session(tmp_path, WebSettings(), public)
    try:
        page = session("browser_navigate", url="http://tides.example/form")
        assert "Page: Harbour office" in page
        assert ("http://tides.example/form", "tides.example") in site.requests
    finally:
        session.close()
