"""web_fetch over HTTPS connects to the address it checked, yet TLS still speaks to the name:
the SNI sent is the host name (not the IP), and the certificate is verified against the name,
so a server whose certificate is for another name is refused even at the checked address."""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from helpers import serving
from talaria.tools.base import ToolContext, ToolError
from talaria.tools.web import fetch
from talaria.tools.web.settings import WebSettings
from talaria.tools.web.tools import fetch_tool
from tls_support import server_context

pytestmark = pytest.mark.timeout(60)

NAME = "docs.tls.test"


class Server:
    def __init__(self, context: ssl.SSLContext) -> None:
        self.names: list[str | None] = []
        self.hosts: list[str] = []
        context.sni_callback = lambda sock, name, ctx: self.names.append(name)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                outer.hosts.append(self.headers.get("Host", ""))
                body = b"<html><body><main><h1>Secure tides</h1><p>High water 06:12.</p></main>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.socket = context.wrap_socket(self.http.socket, server_side=True)
        self.port = self.http.server_address[1]


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    context, cert = server_context(tmp_path, NAME)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the client trusts this certificate only
    fetch._tls.cache_clear()
    running = Server(context)
    with serving(running.http):
        yield running
    fetch._tls.cache_clear()


async def to_loopback(host: str, port: int) -> list[str]:
    return ["127.0.0.1"]


def run(url: str, host: str) -> str:
    ctx = ToolContext("t", "s", Path("."), Path("."), threading.Event(), lambda event: None)
    made = fetch_tool(WebSettings(private_hosts=(host,)), to_loopback)
    result: Any = asyncio.run(made.handler(ctx=ctx, url=url))
    return str(result)


def test_the_checked_address_gets_the_name_in_sni_and_the_host_header(server: Server) -> None:
    page = run(f"https://{NAME}:{server.port}/tides", NAME)
    assert "# Secure tides" in page and "High water 06:12." in page
    assert server.names == [NAME]  # not 127.0.0.1, and not left out
    assert server.hosts == [f"{NAME}:{server.port}"]


def test_a_certificate_for_another_name_is_refused_at_the_same_address(server: Server) -> None:
    with pytest.raises(ToolError, match=r"(?i)certificate|hostname"):
        run(f"https://other.tls.test:{server.port}/tides", "other.tls.test")
    assert server.hosts == []  # nothing was sent over the connection
    assert server.names == ["other.tls.test"]
