"""The web page as a user meets it, in Debian's Chromium (headless, driven by Playwright): a
reload in the middle of a turn, a server that dies and comes back, a phone-sized screen, and
answers with tables, quotes and reasoning. Screenshots go to test-artifacts/."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_support import chromium
from server_helpers import ServeProcess, unattended_workspace
from talaria.testing import ScriptedProvider, call, text

ARTIFACTS = Path(
    os.environ.get("TALARIA_TEST_ARTIFACTS") or Path(__file__).parents[2] / "test-artifacts"
)
WAIT_MS = 30_000

pytestmark = [pytest.mark.timeout(180)]


@pytest.fixture
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=False)


def _open(browser: Any, serve: ServeProcess, **context: Any) -> Any:
    page = browser.new_context(**context).new_page()
    page.goto(f"{serve.url}/?token={serve.key}")
    return page


def _send(page: Any, words: str) -> None:
    page.fill("#input", words)
    page.press("#input", "Enter")


def _wait_text(page: Any, selector: str, words: str) -> None:
    page.wait_for_function(
        "([sel, words]) => [...document.querySelectorAll(sel)]"
        ".some(node => node.textContent.includes(words))",
        arg=[selector, words],
        timeout=WAIT_MS,
    )


def _doomed_folder(home: Path) -> Path:
    target = home / "old-build"
    target.mkdir(parents=True)
    return target


def test_a_reload_mid_turn_reattaches_with_the_pending_approval_and_cancel(
    browser: Any, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    target = _doomed_folder(home)
    steps = [
        call("terminal", {"command": f"rm -rf {target}"}, reasoning="The folder is stale."),
        text("Removed it."),
    ]
    with ScriptedProvider(steps) as provider, ServeProcess(provider, home) as serve:
        page = _open(browser, serve)
        _send(page, "clean up the old build")
        page.locator(".card.approval").wait_for(timeout=WAIT_MS)
        assert "#session=" in page.url, "the open session is kept in the address"

        page.reload()
        approval = page.locator(".card.approval")
        approval.wait_for(timeout=WAIT_MS)
        _shot(page, "web-reattached.png")
        assert page.locator("#cancel").is_visible(), "the running turn can still be cancelled"
        assert page.locator("#send").inner_text() == "Queue", "input during a turn queues"
        assert page.locator("#steer").is_visible()
        assert page.locator(".msg.user").count() == 1, "the turn is shown once, not twice"
        assert page.locator(".card.tool").count() == 1
        assert "stale" in (page.locator(".card.reasoning").text_content() or "")

        approval.get_by_role("button", name="Approve once").click()
        _wait_text(page, ".msg.assistant", "Removed it.")
        page.wait_for_function("() => document.getElementById('send').textContent === 'Send'")
        assert page.locator("#cancel").is_hidden()
    assert not target.exists()


def test_the_page_recovers_when_the_server_dies_and_comes_back(
    browser: Any, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    target = _doomed_folder(home)
    steps = [call("terminal", {"command": f"rm -rf {target}"}), text("Back and listening.")]
    port = _free_port()
    with ScriptedProvider(steps) as provider:
        first = ServeProcess(provider, home, port=port).start()
        page = _open(browser, first)
        _send(page, "clean up the old build")
        page.locator(".card.approval").wait_for(timeout=WAIT_MS)

        assert first.proc is not None
        first.proc.kill()  # no goodbye: the page's stream just breaks
        first.proc.wait(10)
        page.locator("#offline").wait_for(state="visible", timeout=WAIT_MS)

        with ServeProcess(provider, home, port=port):
            page.locator("#offline").wait_for(state="hidden", timeout=WAIT_MS)
            page.wait_for_function("() => document.getElementById('send').textContent === 'Send'")
            _wait_text(page, ".msg.note", "server restarted")
            _send(page, "are you back?")
            _wait_text(page, ".msg.assistant", "Back and listening.")
            _shot(page, "web-after-restart.png")
    assert target.exists(), "the approval was never given"


TABLE_ANSWER = "\n".join(
    [
        "Here is what I found.",
        "",
        "| file | lines |",
        "|---|---:|",
        "| main.py | 120 |",
        "| util.py | 48 |",
        "",
        "> The tests cover both files.",
        "",
        *[f"- point {n}" for n in range(40)],
    ]
)


def test_a_phone_sized_page_renders_tables_quotes_reasoning_and_shows_the_approval(
    browser: Any, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    target = _doomed_folder(home)
    steps = [
        text(TABLE_ANSWER, reasoning="Count the lines of each file."),
        call("terminal", {"command": f"rm -rf {target}"}),
        text("Done."),
    ]
    with ScriptedProvider(steps) as provider, ServeProcess(provider, home) as serve:
        page = _open(browser, serve, viewport={"width": 390, "height": 844})
        composer = page.locator("#input").bounding_box()
        sidebar = page.locator("#sidebar").bounding_box()
        assert composer is not None and sidebar is not None
        assert composer["width"] > 200, "the input gets the width of the screen"
        assert sidebar["x"] + sidebar["width"] <= 0, "the sessions list waits off screen"

        _send(page, "summarise the project")
        page.locator(".msg.assistant table").wait_for(timeout=WAIT_MS)
        _wait_text(page, ".msg.assistant", "point 39")
        cells = page.locator(".msg.assistant td").all_inner_texts()
        assert cells == ["main.py", "120", "util.py", "48"]
        assert page.locator(".msg.assistant th").all_inner_texts() == ["file", "lines"]
        assert "cover both files" in page.locator(".msg.assistant blockquote").inner_text()
        reasoning = page.locator(".card.reasoning")
        reasoning.locator("summary").click()
        assert "Count the lines" in reasoning.inner_text()
        _shot(page, "web-390-answer.png")

        _send(page, "now clean up")
        approve = page.locator(".card.approval").get_by_role("button", name="Approve once")
        approve.wait_for(timeout=WAIT_MS)
        page.wait_for_function(
            "() => { const b = [...document.querySelectorAll('.card.approval button')][0]"
            ".getBoundingClientRect(); return b.top >= 0 && b.bottom <= window.innerHeight; }",
            timeout=WAIT_MS,
        )
        _shot(page, "web-390-approval.png")
        approve.click()
        _wait_text(page, ".msg.assistant", "Done.")

        page.locator("#toggle-sessions").click()
        page.wait_for_function(
            "() => document.getElementById('sidebar').getBoundingClientRect().left >= 0"
        )
        page.locator("#sessions li").first.wait_for(timeout=WAIT_MS)
        _shot(page, "web-390-sessions.png")
    assert not target.exists()


def test_typing_during_a_turn_steers_or_queues(browser: Any, tmp_path: Path) -> None:
    home = tmp_path / "home"
    target = _doomed_folder(home)
    steps = [
        call("terminal", {"command": f"rm -rf {target}"}),
        text("Removed, and the docs are mentioned."),
        text("The queued summary."),
    ]
    with ScriptedProvider(steps) as provider, ServeProcess(provider, home) as serve:
        page = _open(browser, serve)
        _send(page, "clean up the old build")
        approval = page.locator(".card.approval")
        approval.wait_for(timeout=WAIT_MS)

        page.fill("#input", "mention the docs")
        page.locator("#steer").click()
        _wait_text(page, ".msg.user.steer", "mention the docs")
        _send(page, "then summarise")  # Enter while the turn runs: queued
        _wait_text(page, ".msg.note", "queued (1): then summarise")
        _shot(page, "web-steer-and-queue.png")

        approval.get_by_role("button", name="Approve once").click()
        _wait_text(page, ".msg.assistant", "The queued summary.")
        users = page.locator(".msg.user").all_inner_texts()
        assert users == ["clean up the old build", "mention the docs", "then summarise"]
        assert page.locator("[data-queued]").count() == 0, "the queued note became the message"
    assert "mention the docs" in str(provider.requests[1].body)


def test_the_changes_panel_shows_diffs_and_rewinds_a_turn_with_its_report(
    browser: Any, tmp_path: Path
) -> None:
    home, work = unattended_workspace(tmp_path)
    (work / "notes.txt").write_text("one\n")
    (work / "yours.txt").write_text("before\n")
    steps = [
        call("terminal", {"command": "echo two > notes.txt && echo agent > yours.txt"}),
        text("Edited."),
        call("terminal", {"command": "echo three >> notes.txt && echo new > 'new file.txt'"}),
        text("Added."),
    ]
    with ScriptedProvider(steps) as provider, ServeProcess(provider, home, cwd=work) as serve:
        page = _open(browser, serve)
        _send(page, "edit the notes")
        _wait_text(page, ".msg.assistant", "Edited.")
        page.wait_for_function("() => document.getElementById('send').textContent === 'Send'")
        (work / "yours.txt").write_text("my own edit\n")  # by hand, between the turns
        _send(page, "add a line")
        _wait_text(page, ".msg.assistant", "Added.")
        page.wait_for_function("() => document.getElementById('send').textContent === 'Send'")

        page.locator("#changes-button").click()
        turns = page.locator("#changes .turn")
        turns.nth(1).wait_for(timeout=WAIT_MS)
        assert (
            "notes.txt" in turns.nth(1).inner_text() and "new file.txt" in turns.nth(1).inner_text()
        )
        _wait_text(page, "#changes .diff", "+three")
        whole = page.locator("#changes .diff").inner_text()
        assert "-one" in whole and "yours.txt" in whole, "the whole session"
        _shot(page, "web-changes.png")

        turns.nth(1).get_by_role("button", name="Diff since").click()
        _wait_text(page, "#changes .diff-title", "since turn 2")
        since = page.locator("#changes .diff").inner_text()
        assert "+three" in since and "-one" not in since and "yours.txt" not in since

        turns.nth(0).get_by_role("button", name="Rewind…").click()
        turns.nth(0).get_by_role("button", name="Both").click()
        _wait_text(page, "#changes .report", "Rewound to before turn 1")
        report = page.locator("#changes .report").inner_text()
        assert "2 file(s) restored" in report and "new file.txt" in report
        assert "kept as you left them" in report and "yours.txt" in report
        assert page.locator(".msg.user").count() == 0, "the conversation is from before turn 1"
        _shot(page, "web-rewind-report.png")
        assert (work / "notes.txt").read_text() == "one\n"
        assert not (work / "new file.txt").exists()
        assert (work / "yours.txt").read_text() == "my own edit\n", "the user's edit stays"

        page.locator("#changes .report").get_by_role("button", name="Undo").click()
        _wait_text(page, "#changes .report", "Rewound to before turn 3")
        assert (work / "notes.txt").read_text() == "two\nthree\n"
        assert (work / "new file.txt").read_text() == "new\n"

        turns.nth(1).get_by_role("button", name="Rewind…").click()  # the files before a step
        turns.nth(1).get_by_role("button", name="Before step 1 · terminal").click()
        _wait_text(page, "#changes .report", "Rewound to before step 1 of turn 2")
    assert (work / "notes.txt").read_text() == "two\n"
    assert not (work / "new file.txt").exists()
