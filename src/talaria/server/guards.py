"""What a web page must not be able to do to a server on the user's machine, as ASGI middleware.

`HostGuard`: a request must name this server in `Host` (localhost, an IP address, or a name in
`server.allowed_hosts`). After DNS rebinding a hostile page's requests reach 127.0.0.1 while
still naming the page's own domain, so refusing unknown names stops them before any route runs;
an IP address cannot be rebound, so any is accepted.

`WriteGuard`: a request that changes state (POST, PUT, PATCH, DELETE) from a browser must come
from the server's own page or an origin in `server.allowed_origins`, and a body must be JSON. A
page can send a cross-origin `text/plain` or form POST without asking the server first (a CORS
"simple request"); a JSON content type cannot be sent that way.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from talaria.server.errors import error_body
from talaria.server.middleware import send_json

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
ANY = "*"


def host_name(host: str) -> str:
    """The name in a `Host` header, without its port: `[::1]:8642` -> `::1`."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else host
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() and ":" not in name else host


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostGuard:
    """421 for a request whose `Host` is not localhost, an IP address or an allowed name."""

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str]) -> None:
        self.app = app
        self.allowed = {h.strip().lower().rstrip(".") for h in allowed_hosts}

    def accepts(self, host: str) -> bool:
        name = host_name(host).rstrip(".")
        return bool(name) and (
            name == "localhost" or _is_ip(name) or name in self.allowed or ANY in self.allowed
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = Headers(scope=scope).get("host", "")
        if self.accepts(host):
            await self.app(scope, receive, send)
            return
        message = (
            f"this server does not answer to the host {host!r}: use localhost or its IP address, "
            "or add the name to server.allowed_hosts"
        )
        await send_json(send, 421, error_body(421, message), [])


class WriteGuard:
    """403 for a cross-origin write from a browser; 415 for a write whose body is not JSON."""

    def __init__(self, app: ASGIApp, allowed_origins: Iterable[str]) -> None:
        self.app = app
        self.allowed = {o.strip().rstrip("/").lower() for o in allowed_origins}

    def origin_allowed(self, origin: str, host: str) -> bool:
        """Same origin (the `Origin` names the host the request was sent to) or allowed."""
        origin = origin.strip().rstrip("/").lower()
        if origin in self.allowed or ANY in self.allowed:
            return True
        try:
            netloc = urlsplit(origin).netloc
        except ValueError:
            return False
        return bool(netloc) and netloc == host.strip().lower()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in WRITE_METHODS:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin, headers.get("host", "")):
            message = (
                f"a request from the web origin {origin!r} may not change anything here: only "
                "this server's own page and the origins in server.allowed_origins may"
            )
            await send_json(send, 403, error_body(403, message), [])
            return
        if _has_body(headers) and not is_json(headers.get("content-type", "")):
            message = "a request body must be JSON (Content-Type: application/json)"
            await send_json(send, 415, error_body(415, message), [])
            return
        await self.app(scope, receive, send)


def _has_body(headers: Headers) -> bool:
    length = headers.get("content-length")
    return "transfer-encoding" in headers or (length is not None and length.strip() != "0")


def is_json(content_type: str) -> bool:
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )
