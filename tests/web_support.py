"""A loopback web site for the web and browser tools' tests: an article page, a PDF, redirect
chains, a page that redirects to a private address, a SearXNG stand-in (`/search?format=json`),
a form, a page that reaches for private addresses from script, a noisy console, a download.
It records every request (path and Host header), so a test can see what reached it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from helpers import serving

ARTICLE = """<!doctype html><html><head><title>Tide tables</title>
<script>window.tracking = 1;</script><style>nav { color: red }</style></head><body>
<nav><ul>{menu}</ul></nav>
<main><article><h1>Reading tide tables</h1>
<p>A tide table lists the times of <a href="/high-water">high water</a> and low water for a
port. Each row gives the height above chart datum in metres, which sailors compare against
the depth shown on the chart before they cross a bar.</p>
<p>Spring tides come twice a month, near the new and the full moon; neap tides fall between
them. The range of a spring tide can be twice that of a neap tide in the same port.</p>
<table><tr><th>Time</th><th>Height</th></tr><tr><td>06:12</td><td>4.1</td></tr></table>
</article></main>
<footer>Copyright the harbour office. <a href="/privacy">Privacy</a></footer>
</body></html>""".replace(
    "{menu}", "".join(f'<li><a href="/menu{i}">Menu item {i}</a></li>' for i in range(20))
)

FORM = """<!doctype html><html><head><title>Harbour office</title></head><body>
<h1>Book a mooring</h1>
<form action="/greet" method="get">
<label>Boat name <input name="boat"></label>
<label><input type="checkbox" name="long"> Longer than 12 m</label>
<button type="submit">Book</button></form>
<a href="/article" target="_blank">Tide tables (new tab)</a>
<a href="/tides.csv">Download the tide table</a>
</body></html>"""

EXFIL = """<!doctype html><html><head><title>Innocent page</title></head><body>
<p>Nothing to see.</p><img src="http://10.0.0.1/pixel.png">
<script>
fetch("http://169.254.169.254/latest/meta-data/").catch(() => {});
fetch("http://127.0.0.1:{port}/secret").catch(() => {});
</script></body></html>"""

CONSOLE = """<!doctype html><html><head><title>Noisy</title></head><body><p>Noisy page</p>
<script>console.error("the tide is late"); setTimeout(() => { throw new Error("no moon"); });
</script></body></html>"""

PDF_TEXT = "Harbour notice: the north channel is closed."


def pdf_bytes(text: str = PDF_TEXT) -> bytes:
    """A one-page PDF whose text layer says `text` (built by hand: no writer needed)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


SEARCH_RESULTS = [
    {"title": "Tide tables explained", "url": "https://tides.example/explained",
     "content": "How to read a tide table, with examples."},
    {"title": "Spring and neap tides", "url": "https://tides.example/spring-neap",
     "content": "Why the range changes over a month."},
    {"title": "Chart datum", "url": "https://charts.example/datum", "content": ""},
]  # fmt: skip


class WebSite:
    """The running site: `url(path)` on 127.0.0.1, `requests` as (path, Host) pairs."""

    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.port = server.server_address[1]
        self.requests: list[tuple[str, str]] = []
        self.queries: list[dict[str, list[str]]] = []

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


def _handler(site_ref: list[WebSite]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            site = site_ref[0]
            site.requests.append((self.path, self.headers.get("Host", "")))
            parts = urlsplit(self.path)
            path = parts.path
            if path == "/article":
                self._send(200, "text/html; charset=utf-8", ARTICLE.encode())
            elif path == "/notice.pdf":
                self._send(200, "application/pdf", pdf_bytes())
            elif path == "/plain.txt":
                self._send(200, "text/plain; charset=latin-1", "caf\xe9 au lait".encode("latin-1"))
            elif path == "/image.png":
                self._send(200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
            elif path == "/big":
                self._send(200, "text/plain", b"x" * 200_000)
            elif path.startswith("/hop/"):
                left = int(path.rsplit("/", 1)[1])
                target = "/article" if left <= 0 else f"/hop/{left - 1}"
                self._redirect(target)
            elif path == "/to-loopback":
                self._redirect(site.url("/article", "127.0.0.1"))
            elif path == "/to-private":
                self._redirect("http://10.0.0.1/admin")
            elif path == "/to-metadata":
                self._redirect("http://169.254.169.254/latest/meta-data/")
            elif path == "/form":
                self._send(200, "text/html; charset=utf-8", FORM.encode())
            elif path == "/greet":
                boat = parse_qs(parts.query).get("boat", ["?"])[0]
                page = f"<title>Booked</title><p>Mooring booked for {boat}.</p>"
                self._send(200, "text/html; charset=utf-8", page.encode())
            elif path == "/exfil":
                page = EXFIL.replace("{port}", str(site.port))
                self._send(200, "text/html; charset=utf-8", page.encode())
            elif path == "/console":
                self._send(200, "text/html; charset=utf-8", CONSOLE.encode())
            elif path == "/tides.csv":
                self._send(
                    200,
                    "text/csv",
                    b"time,height\n06:12,4.1\n",
                    {"Content-Disposition": 'attachment; filename="tides.csv"'},
                )
            elif path == "/missing":
                self._send(404, "text/html", b"<p>not here</p>")
            elif path == "/no-json/search":  # a SearXNG whose settings leave out json
                self._send(403, "text/html", b"<p>Forbidden</p>")
            elif path == "/search":
                query = parse_qs(parts.query)
                site.queries.append(query)
                if query.get("format") != ["json"]:
                    self._send(403, "text/html", b"forbidden")
                else:
                    body = {"query": query.get("q", [""])[0], "results": SEARCH_RESULTS}
                    self._send(200, "application/json", json.dumps(body).encode())
            else:
                self._send(404, "text/plain", b"no such page")

        def _redirect(self, location: str) -> None:
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _send(
            self, status: int, content_type: str, body: bytes, headers: dict[str, str] | None = None
        ) -> None:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@contextmanager
def web_site() -> Iterator[WebSite]:
    """The site on a free loopback port, for the duration of the block."""
    ref: list[WebSite] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(ref))
    ref.append(WebSite(server))
    with serving(server):
        yield ref[0]
