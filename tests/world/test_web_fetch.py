"""web_fetch against a loopback web site, through a real Agent on the scripted provider:
clean markdown from HTML, text from a PDF, redirect chains followed, and every hop held to the
address rules (a redirect to 127.0.0.1 or a private address and a name that resolves to
loopback are refused), the domain rules and the sandbox's network setting.

The site is on loopback, which web_fetch refuses by default: tests that fetch it allow the
name `localhost` explicitly (`web.allow_private: [localhost]`), so the refusals of every other
private address are tested at the same time.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import scripted_agent, tool_results
from talaria.testing import ScriptedProvider, call, text
from talaria.tools.base import ToolContext
from talaria.tools.web.settings import WebSettings
from talaria.tools.web.tools import fetch_tool
from web_support import PDF_TEXT, WebSite, web_site

pytestmark = pytest.mark.timeout(60)

ALLOW_LOCALHOST = {"web.allow_private": ["localhost"], "sandbox.network": True}


@pytest.fixture
def site() -> Iterator[WebSite]:
    with web_site() as running:
        yield running


def fetch(
    home: Path, calls: list[dict[str, Any]], config: dict[str, Any], **kwargs: Any
) -> list[str]:
    """The tool results of a turn whose model calls web_fetch with each of `calls`."""
    script = [*(call("web_fetch", arguments) for arguments in calls), text("read")]
    with ScriptedProvider(script) as server:
        agent = scripted_agent(server, home, tools=[], toolsets=["web"], config=config, **kwargs)
        return tool_results(agent.run_conversation("read the page"))


def test_a_page_comes_back_as_markdown_of_its_main_content(tmp_path: Path, site: WebSite) -> None:
    (page,) = fetch(tmp_path, [{"url": site.url("/article", "localhost")}], ALLOW_LOCALHOST)
    assert "# Reading tide tables" in page
    assert "[high water](http://localhost:" in page  # links kept, made absolute
    assert "| 06:12 | 4.1 |" in page  # tables kept
    assert "Spring tides come twice a month" in page
    assert "Menu item" not in page and "tracking" not in page and "Copyright" not in page


def test_a_pdf_comes_back_as_its_text(tmp_path: Path, site: WebSite) -> None:
    (page,) = fetch(tmp_path, [{"url": site.url("/notice.pdf", "localhost")}], ALLOW_LOCALHOST)
    assert PDF_TEXT in page


def test_plain_text_is_decoded_by_its_charset_and_images_are_refused(
    tmp_path: Path, site: WebSite
) -> None:
    plain, image = fetch(
        tmp_path,
        [
            {"url": site.url("/plain.txt", "localhost")},
            {"url": site.url("/image.png", "localhost")},
        ],
        ALLOW_LOCALHOST,
    )
    assert plain == "café au lait"
    assert image.startswith("Error:") and "image/png" in image and "not a web page" in image


def test_a_redirect_chain_is_followed_and_the_result_says_where_it_ended(
    tmp_path: Path, site: WebSite
) -> None:
    (page,) = fetch(tmp_path, [{"url": site.url("/hop/3", "localhost")}], ALLOW_LOCALHOST)
    assert page.startswith(f"(redirected to {site.url('/article', 'localhost')})")
    assert "# Reading tide tables" in page
    assert [path for path, _ in site.requests] == [
        "/hop/3",
        "/hop/2",
        "/hop/1",
        "/hop/0",
        "/article",
    ]


def test_too_many_redirects_are_an_error(tmp_path: Path, site: WebSite) -> None:
    (page,) = fetch(tmp_path, [{"url": site.url("/hop/9", "localhost")}], ALLOW_LOCALHOST)
    assert page.startswith("Error: too many redirects")
    assert len(site.requests) == 6


@pytest.mark.parametrize(
    ("path", "address"),
    [
        ("/to-loopback", "127.0.0.1"),
        ("/to-private", "10.0.0.1"),
        ("/to-metadata", "169.254.169.254"),
    ],
)
def test_a_redirect_to_a_private_address_is_refused(
    tmp_path: Path, site: WebSite, path: str, address: str
) -> None:
    (page,) = fetch(tmp_path, [{"url": site.url(path, "localhost")}], ALLOW_LOCALHOST)
    assert page.startswith("Error: refused:") and address in page
    assert [p for p, _ in site.requests] == [path]  # nothing was fetched after the redirect


def test_loopback_and_names_that_resolve_to_it_are_refused_by_default(
    tmp_path: Path, site: WebSite
) -> None:
    pages = fetch(
        tmp_path,
        [
            {"url": site.url("/article", "127.0.0.1")},
            {"url": site.url("/article", "localhost")},
            {"url": site.url("/article", "[::1]")},
            {"url": f"http://2130706433:{site.port}/article"},  # 127.0.0.1 as one number
        ],
        {"sandbox.network": True},
    )
    for page in pages:
        assert page.startswith("Error: refused:") and "web.allow_private" in page, page
    assert site.requests == []


def test_the_request_goes_to_the_address_that_was_checked(site: WebSite) -> None:
    """DNS rebinding: the name is resolved once, and the connection is made to that address
    (a second lookup by the HTTP client could answer differently)."""
    lookups: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"] if len(lookups) == 1 else ["192.0.2.1"]

    settings = WebSettings(private_hosts=("docs.rebind.test",))
    page = run_tool(fetch_tool(settings, resolve), url=site.url("/article", "docs.rebind.test"))
    assert "# Reading tide tables" in page
    assert lookups == ["docs.rebind.test"]
    assert site.requests == [("/article", f"docs.rebind.test:{site.port}")]


def test_a_name_with_any_private_address_is_refused_before_connecting() -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return ["8.8.8.8", "127.0.0.1"]

    with pytest.raises(Exception, match=r"refused: mixed\.test is 127\.0\.0\.1"):
        run_tool(fetch_tool(WebSettings(), resolve), url="http://mixed.test/")


def test_web_deny_and_web_allow_refuse_before_anything_is_fetched(
    tmp_path: Path, site: WebSite
) -> None:
    (denied,) = fetch(
        tmp_path,
        [{"url": site.url("/article", "localhost")}],
        {**ALLOW_LOCALHOST, "web.deny": ["localhost"]},
    )
    assert denied.startswith("Error: refused: localhost is denied by web.deny")
    (only_allowed,) = fetch(
        tmp_path / "second",
        [{"url": site.url("/article", "localhost")}],
        {**ALLOW_LOCALHOST, "web.allow": ["docs.example"]},
    )
    assert only_allowed == "Error: refused: localhost is not in web.allow"
    assert site.requests == []


def test_an_unknown_domain_is_asked_about_in_manual_mode(tmp_path: Path, site: WebSite) -> None:
    asked: list[str] = []

    def approve(request: Any) -> str:
        asked.append(request.command)
        return "deny" if len(asked) == 1 else "once"

    config = {**ALLOW_LOCALHOST, "web.ask_unknown": True, "web.allow": ["docs.example"]}
    url = site.url("/article", "localhost")
    refused, fetched = fetch(
        tmp_path, [{"url": url}, {"url": url}], config, approval_callback=approve
    )
    assert asked == ["web_fetch localhost", "web_fetch localhost"]
    assert refused.startswith("Denied by the user")
    assert "# Reading tide tables" in fetched
    assert len(site.requests) == 1


def test_without_sandbox_network_nothing_is_fetched(tmp_path: Path, site: WebSite) -> None:
    (page,) = fetch(
        tmp_path, [{"url": site.url("/article", "localhost")}], {"web.allow_private": True}
    )
    assert page.startswith("Error: refused: the sandbox has no network")
    assert site.requests == []


def test_a_page_is_fetched_once_per_session_and_cut_to_max_chars(
    tmp_path: Path, site: WebSite
) -> None:
    url = site.url("/big", "localhost")
    short, again = fetch(
        tmp_path, [{"url": url, "max_chars": 1000}, {"url": url, "max_chars": 500}], ALLOW_LOCALHOST
    )
    assert short.startswith("x" * 1000) and "199,000 more characters" in short
    assert again.startswith("x" * 500) and "199,500 more characters" in again
    assert len(site.requests) == 1


def test_a_long_page_is_spilled_to_a_file_like_other_long_results(
    tmp_path: Path, site: WebSite
) -> None:
    (page,) = fetch(
        tmp_path, [{"url": site.url("/big", "localhost"), "max_chars": 150_000}], ALLOW_LOCALHOST
    )
    spilled = next((tmp_path / "tool_outputs").glob("web_fetch-*.txt"))
    assert "The full output is saved in" in page and str(spilled) in page
    assert spilled.read_text().startswith("x" * 150_000)


def test_a_proxy_the_user_configured_is_used(
    site: WebSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a proxy the name is still checked here, then the proxy is asked for the URL."""

    async def resolve(host: str, port: int) -> list[str]:
        return ["8.8.8.8"]  # public; never connected to: the proxy is

    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{site.port}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    page = run_tool(fetch_tool(WebSettings(), resolve), url="http://tides.example/article")
    assert "# Reading tide tables" in page
    assert site.requests == [("http://tides.example/article", "tides.example")]


def test_http_errors_and_bad_urls_are_errors_the_model_reads(tmp_path: Path, site: WebSite) -> None:
    missing, ftp, relative = fetch(
        tmp_path,
        [
            {"url": site.url("/missing", "localhost")},
            {"url": "ftp://localhost/file"},
            {"url": "/article"},
        ],
        ALLOW_LOCALHOST,
    )
    assert missing == f"Error: HTTP 404 from {site.url('/missing', 'localhost')}"
    assert ftp.startswith("Error: invalid URL") and relative.startswith("Error: invalid URL")


def test_the_web_toolset_is_not_a_default_one(tmp_path: Path) -> None:
    with ScriptedProvider([text("hi")]) as server:
        plain = scripted_agent(server, tmp_path, tools=None, toolsets=None)
        plain.warm_up()
        enabled = scripted_agent(
            server, tmp_path, tools=None, toolsets=None, config={"web.enabled": True}
        )
        enabled.warm_up()
    assert "web_fetch" not in plain.tools and "web_search" not in plain.tools
    assert "web_fetch" in enabled.tools
    assert "web_search" not in enabled.tools  # no search backend configured


def run_tool(made: Any, **arguments: Any) -> str:
    ctx = ToolContext(
        task_id="t",
        session_id="s",
        cwd=Path("."),
        home=Path("."),
        interrupt=threading.Event(),
        emit=lambda event: None,
    )
    return str(asyncio.run(made.handler(ctx=ctx, **arguments)))


def test_an_asked_domain_may_redirect_within_itself_but_not_to_another(
    tmp_path: Path, site: WebSite
) -> None:
    asked: list[str] = []

    def approve(request: Any) -> str:
        asked.append(request.command)
        return "once"

    config = {**ALLOW_LOCALHOST, "web.ask_unknown": True}
    within, elsewhere = fetch(
        tmp_path,
        [{"url": site.url("/hop/1", "localhost")}, {"url": site.url("/to-loopback", "localhost")}],
        config,
        approval_callback=approve,
    )
    assert asked == ["web_fetch localhost", "web_fetch localhost"]
    assert "# Reading tide tables" in within
    assert elsewhere.startswith("Error: refused: the page redirects to http://127.0.0.1:")
    assert [path for path, _ in site.requests] == ["/hop/1", "/hop/0", "/article", "/to-loopback"]
