"""Bearer-key auth and the body size limit, as plain ASGI middleware.

There is no cookie: a browser would attach one to any page's request, so a page on another
origin could use it. The web page instead takes the key from its own address (`/?token=<key>`,
the address `talaria serve` prints), keeps it in the tab, and sends it as a bearer header.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from talaria.server.errors import ApiError, error_body

OPEN_PATHS = frozenset({"/", "/health"})


async def send_json(send: Send, status: int, body: Any, headers: list[tuple[bytes, bytes]]) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


class KeyAuth:
    """401 unless the request carries `Authorization: Bearer <key>`; the page and its assets
    (static files that hold nothing) and `/health` are open, so a browser can load the page
    that then sends the key."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app = app
        self.key = key.encode()

    def _open(self, path: str) -> bool:
        return path in OPEN_PATHS or path.startswith("/assets/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._open(scope["path"]):
            await self.app(scope, receive, send)
            return
        scheme, _, token = Headers(scope=scope).get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.key):
            await self.app(scope, receive, send)
            return
        await send_json(
            send,
            401,
            error_body(
                401,
                "a valid API key is required: send 'Authorization: Bearer <key>' "
                "(browsers: open the address talaria serve printed, /?token=<key>)",
            ),
            [(b"www-authenticate", b"Bearer")],
        )


class BodyLimit:
    """413 for a body over `limit` bytes: at once from Content-Length, else while reading."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared and declared.isdigit() and int(declared) > self.limit:
            await send_json(send, 413, error_body(413, self._message()), [])
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise ApiError(413, self._message())
            return message

        await self.app(scope, counted, send)

    def _message(self) -> str:
        return f"the request body is larger than the limit of {self.limit} bytes"
