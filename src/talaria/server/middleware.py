"""Bearer-key auth and the body size limit, as plain ASGI middleware.

A browser cannot put a bearer header on a page load or an EventSource, so the web page trades
the key once: `GET /?key=<key>` sets an HttpOnly, SameSite=Strict cookie holding it and
redirects to `/`; same-origin requests then carry the cookie.
"""

from __future__ import annotations

import hmac
import json
from typing import Any
from urllib.parse import parse_qs

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from talaria.server.errors import ApiError, error_body

KEY_COOKIE = "talaria_key"
OPEN_PATHS = frozenset({"/health"})


async def _send_json(
    send: Send, status: int, body: Any, headers: list[tuple[bytes, bytes]]
) -> None:
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
    def __init__(self, app: ASGIApp, key: str | None) -> None:
        self.app = app
        self.key = key

    def _matches(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(candidate.encode(), self.key.encode())  # type: ignore[union-attr]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.key is None or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if (scheme.lower() == "bearer" and self._matches(token.strip())) or self._matches(
            _cookie(headers, KEY_COOKIE)
        ):
            await self.app(scope, receive, send)
            return
        offered = parse_qs(scope.get("query_string", b"").decode()).get("key", [None])[0]
        if scope["path"] == "/" and self._matches(offered):
            await self._set_cookie(send)
            return
        await _send_json(
            send,
            401,
            error_body(
                401,
                "a valid API key is required: send 'Authorization: Bearer <key>' "
                "(browsers: open /?key=<key> once)",
            ),
            [(b"www-authenticate", b"Bearer")],
        )

    async def _set_cookie(self, send: Send) -> None:
        cookie = f"{KEY_COOKIE}={self.key}; HttpOnly; SameSite=Strict; Path=/"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [(b"location", b"/"), (b"set-cookie", cookie.encode())],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _cookie(headers: Headers, name: str) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


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
            await _send_json(send, 413, error_body(413, self._message()), [])
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
