"""The web page in a real browser (Debian's Chromium driven by Playwright, headless): type a
message, approve the command the agent wants to run, see the tool card and the streamed answer."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser_support import chromium
from server_helpers import ServeProcess
from talaria.testing import ScriptedProvider, call, text

ARTIFACTS = Path(
    os.environ.get("TALARIA_TEST_ARTIFACTS") or Path(__file__).parents[2] / "test-artifacts"
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]


@pytest.fixture
def browser() -> Iterator[object]:
    with chromium() as launched:
        yield launched


def test_chat_in_the_browser_with_an_approval_and_a_tool_card(browser, tmp_path: Path) -> None:
    home = tmp_path / "home"  # the server's working directory (the sandbox's workspace)
    target = home / "old-build"
    target.mkdir(parents=True)
    answer = "Removed the **old build**. <b>not bold</b>"
    steps = [
        call("terminal", {"command": f"rm -rf {target}"}),
        text(answer, chunk_size=5, chunk_delay=0.02),
    ]
    # No key configured: the server makes one and prints the page's address with it.
    with ScriptedProvider(steps) as provider, ServeProcess(provider, home, key=None) as serve:
        page = browser.new_page()
        page.goto(f"{serve.url}/?token={serve.key}")  # the address talaria serve printed
        assert page.url == f"{serve.url}/", "the token leaves the address bar"
        page.fill("#input", "clean up the old build")
        page.press("#input", "Enter")

        approval = page.locator(".card.approval")
        approval.wait_for(timeout=30_000)
        assert f"rm -rf {target}" in approval.locator(".command").inner_text()
        approval.get_by_role("button", name="Approve once").click()

        reply = page.locator(".msg.assistant").last
        # The answer streams in chunks of five characters: wait for its last one before reading
        # it, or the assertions below see a half-streamed "<b>not bold</".
        answered = "() => [...document.querySelectorAll('.msg.assistant')]" + (
            ".some(m => m.textContent.includes('<b>not bold</b>'))"
        )
        page.wait_for_function(answered, timeout=30_000)
        assert reply.locator("strong").inner_text() == "old build"
        assert reply.locator("b").count() == 0, "HTML in the answer is shown, never run"
        assert "<b>not bold</b>" in reply.inner_text()
        tool = page.locator(".card.tool")
        assert "terminal" in tool.locator(".head").inner_text()
        assert tool.locator(".output").inner_text() != "running…"
        assert "once" in approval.locator(".head").inner_text()
        page.wait_for_function(
            "() => document.getElementById('usage').textContent.includes('tokens')"
        )
        page.locator("#sessions li").first.wait_for()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / "server-web-chat.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot: {shot}")
    assert not target.exists()
