"""A fetched page as text a model reads well: HTML as the markdown of its main content (links
and tables kept, menus and footers left out), PDFs as their text, other text as it is.

trafilatura does the HTML (measured against readability-lxml + markdownify on an article page
with a menu, links, code and a table: both kept the article and its links and dropped the menu;
trafilatura kept the table too and took about two thirds of the time). pypdf reads PDFs.
Both are the `web` extra, imported on the first page that needs them.
"""

from __future__ import annotations

import io

from talaria.tools.base import ToolError
from talaria.tools.web.fetch import Page

_HTML_TYPES = ("text/html", "application/xhtml+xml")
_TEXT_TYPES = ("application/json", "application/xml", "application/javascript")


def readable_text(page: Page) -> str:
    """The page's readable text; a `ToolError` for content that has none (an image, a zip)."""
    kind = _kind(page)
    if kind == "pdf":
        text = _pdf_text(page.body, page.truncated)
    elif kind == "html":
        text = _html_markdown(page.body, page.url)
    else:
        text = page.body.decode(page.charset, errors="replace")
    if page.truncated:
        read = f"{len(page.body):,}"
        text += f"\n\n[the page is over web.max_bytes; only its first {read} bytes were read]"
    return text


def _kind(page: Page) -> str:
    if page.content_type == "application/pdf" or page.body.startswith(b"%PDF-"):
        return "pdf"
    if page.content_type in _HTML_TYPES or (
        not page.content_type
        and page.body.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html"))
    ):
        return "html"
    if page.content_type.startswith("text/") or page.content_type in _TEXT_TYPES:
        return "text"
    raise ToolError(
        f"{page.url} is {page.content_type or 'of an unknown type'} ({len(page.body):,} bytes), "
        "not a web page, PDF or text"
    )


def _html_markdown(body: bytes, url: str) -> str:
    try:
        import trafilatura
    except ImportError:
        raise ToolError(_MISSING) from None
    markdown = trafilatura.extract(
        body,
        url=url,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        include_images=False,
        favor_recall=True,
    )
    if markdown:
        return str(markdown)
    text = trafilatura.html2txt(body)
    return str(text) if text else "(the page has no readable text)"


def _pdf_text(body: bytes, truncated: bool) -> str:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError:
        raise ToolError(_MISSING) from None
    try:
        reader = PdfReader(io.BytesIO(body))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:
        cut = " (it was cut at web.max_bytes)" if truncated else ""
        raise ToolError(f"the PDF cannot be read{cut}: {exc}") from None
    text = "\n\n".join(
        f"--- page {number} ---\n{page.strip()}" for number, page in enumerate(pages, 1)
    )
    return text or "(the PDF has no text layer)"


_MISSING = "web_fetch needs the web extra: pip install 'talaria[web]'"
