"""The guard proxy: every request Chromium makes goes through it, and it connects only where
`web_fetch` may (`talaria.tools.web`): http(s) only, `web.deny` and `web.allow`, and no
private, loopback or link-local address unless `web.allow_private` says so.

Request interception inside the browser (the Fetch domain) sees URLs, not the address the
browser then connects to: a name that resolves to a public address for the check and to
169.254.169.254 for the connection (DNS rebinding) would pass it. Here the name is resolved
once, every address checked, and the connection made to the checked address, so the rule
holds for navigations, redirects, subresources, fetch() and websockets alike. An HTTPS
tunnel (CONNECT) is checked the same way; TLS stays end to end, so Chromium still verifies
the certificate against the name. This small HTTP/1.1 proxy is written here because it is
the place where the check and the connection are one step; no proxy package does that.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
from collections import OrderedDict
from urllib.parse import unquote, urlsplit, urlunsplit

from talaria.tools.base import ToolError
from talaria.tools.web.addresses import Resolver, checked_addresses
from talaria.tools.web.fetch import proxy_for, target
from talaria.tools.web.settings import WebSettings

MAX_HEAD = 64 * 1024
REFUSALS_KEPT = 500
_HOP_HEADERS = {"proxy-connection", "proxy-authorization", "connection", "keep-alive"}


class GuardProxy:
    """An HTTP proxy on 127.0.0.1 for one browser. `refusals` holds why recent requests were
    refused, by URL (plain http) or by `host:port` (an HTTPS tunnel), for the tab whose
    request it was to report; requests of the browser's own (updates) are never reported."""

    def __init__(self, settings: WebSettings, resolve: Resolver) -> None:
        self.settings = settings
        self.resolve = resolve
        self.refusals: OrderedDict[str, str] = OrderedDict()
        self.allowed_hosts: set[str] = set()
        """Domains outside `web.allow` the user approved for this browser."""
        self.protected_ports: set[int] = set()
        """Loopback ports never connected to (this proxy's and the browser's DevTools)."""
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=MAX_HEAD)
        port = int(self._server.sockets[0].getsockname()[1])
        self.protected_ports.add(port)
        return port

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._relay(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *headers = head.decode("latin-1").split("\r\n")[:-2]
        method, where, version = request_line.split(" ", 2)
        tunnel = method.upper() == "CONNECT"
        url = f"https://{where}/" if tunnel else where
        try:
            host, port, address = await self.check(url)
        except ToolError as exc:
            self._refused(where if tunnel else url, str(exc))
            body = f"talaria refused this request: {exc}\n".encode()
            writer.write(
                b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n"
                + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
            return
        proxy = proxy_for("https" if tunnel else "http", host)
        try:
            upstream_reader, upstream = await asyncio.wait_for(
                self._connect(proxy, address, port, where if tunnel else None),
                self.settings.timeout,
            )
        except (OSError, TimeoutError) as exc:
            self._refused(where if tunnel else url, f"cannot connect to {host} ({address}): {exc}")
            writer.write(
                b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            await writer.drain()
            return
        try:
            if tunnel:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream.write(_forwarded(method, url, version, headers, proxy))
            await asyncio.gather(_pipe(reader, upstream), _pipe(upstream_reader, writer))
        finally:
            upstream.close()

    async def _connect(
        self, proxy: str | None, address: str, port: int, tunnel: str | None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to the checked address, or through the user's proxy (`*_proxy`, as
        `web_fetch` uses it: the name was checked here, the proxy resolves it), with the
        tunnel to `tunnel` (host:port) already open."""
        if proxy is None:
            return await asyncio.open_connection(address, port)
        parts = urlsplit(proxy)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
        if tunnel is not None:
            auth = _proxy_authorization(parts.username, parts.password)
            writer.write(f"CONNECT {tunnel} HTTP/1.1\r\nHost: {tunnel}\r\n{auth}\r\n".encode())
            answer = (await reader.readuntil(b"\r\n\r\n")).split(b" ", 2)
            if len(answer) < 2 or answer[1] != b"200":
                writer.close()
                raise OSError(f"the proxy {parts.hostname} refused the tunnel")
        return reader, writer

    def _refused(self, key: str, reason: str) -> None:
        self.refusals[key.lower()] = reason
        while len(self.refusals) > REFUSALS_KEPT:
            self.refusals.popitem(last=False)

    def why_refused(self, url: str) -> str | None:
        """Why the request for `url` was refused, if it was."""
        found = self.refusals.get(url.lower())
        if found is None:
            try:
                parts = urlsplit(url)
                port = parts.port or (443 if parts.scheme == "https" else 80)
            except ValueError:
                return None
            found = self.refusals.get(f"{parts.hostname}:{port}".lower())
        return found

    async def check(self, url: str) -> tuple[str, int, str]:
        """(host, port, the checked address to connect to) for a URL the rules allow, else a
        `ToolError` saying why not."""
        _, host, port = target(url, self.settings)
        name = host.lower().rstrip(".")
        if not self.settings.known(name) and name not in self.allowed_hosts:
            if self.settings.allow or not self.settings.ask_unknown:
                raise ToolError(f"{host} is not in web.allow")
            raise ToolError(f"{host} is a domain nobody approved (web.ask_unknown)")
        addresses = await checked_addresses(
            host, port, allow_private=self.settings.private_ok(host), resolve=self.resolve
        )
        address = addresses[0]
        if port in self.protected_ports and _reaches_this_machine(address):
            raise ToolError("the browser's own control ports are never connected to")
        return host, port, address


def _reaches_this_machine(address: str) -> bool:
    """Loopback, or the unspecified address (connecting to 0.0.0.0 reaches this machine),
    also when written inside an IPv6 address."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified


def _forwarded(method: str, url: str, version: str, headers: list[str], proxy: str | None) -> bytes:
    """The request as the next hop expects it: for the server its path (not the full URL) on
    the request line, for the user's proxy the full URL and its credentials; this proxy's own
    headers dropped, and the connection closed after one response."""
    parts = urlsplit(url)
    path = urlunsplit(("", "", parts.path or "/", parts.query, ""))
    kept = [
        line
        for line in headers
        if line and line.split(":", 1)[0].strip().lower() not in _HOP_HEADERS
    ]
    if proxy is not None:
        upstream = urlsplit(proxy)
        path = url
        kept.append(_proxy_authorization(upstream.username, upstream.password).strip())
    lines = [f"{method} {path} {version}", *filter(None, kept), "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1")


def _proxy_authorization(user: str | None, password: str | None) -> str:
    """The header line that logs in to the user's proxy, "" when its URL names nobody."""
    if not user:
        return ""
    token = base64.b64encode(f"{unquote(user)}:{unquote(password or '')}".encode()).decode()
    return f"Proxy-Authorization: Basic {token}\r\n"


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if sink.can_write_eof():
                sink.write_eof()
