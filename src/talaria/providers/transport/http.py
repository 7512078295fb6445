"""The HTTP layer every model call goes through: one shared pool per event loop.

Why these choices (numbers in docs/performance.md, from ``bench/transport.py``):

* One pool per event loop, shared by every agent and endpoint client on it: connections are
  reused across agents, and a process with many agents keeps one TLS context, not one each.
* ``http://`` and ``https://`` without a proxy go through talaria's own HTTP/1.1 client
  (`http11`; TLS from `ssl` with the process's one verified context): no HTTP library to
  import, which is a bare interpreter's start-up plus a little, and a seventh of the CPU per
  step. Proxied requests go through httpx2 (``HTTPS_PROXY``, ``NO_PROXY``...), and so does
  ``https://`` when ``TALARIA_HTTP2`` asks for HTTP/2 where the server offers it (ALPN). The
  official SDKs speak HTTP/1.1 by default too.
* A pool belongs to its loop and is closed when the loop shuts down its async generators
  (``asyncio.run`` and the agent's own loop both do), so a loop per synchronous call neither
  leaks connections nor prints "Event loop is closed".

httpx2 is imported on the first request that needs it, never with ``import talaria``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode, urlsplit

from talaria import fastjson
from talaria.providers.transport.drain import Drains, read_to_end
from talaria.providers.transport.http11 import (
    ConnectFailedError,
    Http11Pool,
    Target,
    shared_ssl_context,
)
from talaria.providers.transport.sent import request_sent

if TYPE_CHECKING:
    import httpx2

USER_AGENT = "talaria/0.1"
MAX_ERROR_BODY = 64 * 1024
"""Bytes of an error answer kept for the message (a proxy's HTML page can be large)."""


class HTTPStatusError(Exception):
    """An HTTP error answer; `classify_exception` reads its status, body and headers."""

    def __init__(self, status_code: int, body: Any, headers: Mapping[str, str]) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code
        self.body = body
        self.headers = {key.lower(): value for key, value in headers.items()}


class BadURLError(ValueError):
    """A base URL no request can be made to (bad port, unknown scheme): a configuration error."""


PROXY_VARIABLES = {
    False: ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"),
    True: ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"),
}
"""With one of these set, ``http://`` (False) or ``https://`` (True) requests go through
httpx2, which honours the proxy and ``NO_PROXY``."""
HTTP2_VARIABLE = "TALARIA_HTTP2"
"""Set (to anything but empty or 0), ``https://`` goes through httpx2 with HTTP/2 offered."""


class StreamedAnswer(Protocol):
    """What callers read of an answer, from either client."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    def aiter_bytes(self) -> AsyncIterator[bytes]: ...
    async def aread(self) -> bytes: ...
    async def aclose(self) -> None: ...


class _LoopPools:
    """The clients of one event loop: talaria's own for direct plain HTTP, httpx2's for HTTPS
    and for plain HTTP through a proxy (made on first use)."""

    def __init__(self) -> None:
        self.direct = Http11Pool()
        self.clients: dict[bool, httpx2.AsyncClient] = {}
        self.drains = Drains()
        """httpx2's HTTP/1.1 answers being read to their end (see `_KeptAlive`)."""
        self.lifetime: AsyncGenerator[None, None] | None = None

    def client(self, secure: bool) -> httpx2.AsyncClient:
        if secure not in self.clients:
            self.clients[secure] = _new_client(secure)
        return self.clients[secure]

    async def aclose(self) -> None:
        await self.drains.aclose()
        clients, self.clients = list(self.clients.values()), {}
        for client in clients:
            with contextlib.suppress(Exception):
                await client.aclose()
        await self.direct.aclose()


_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopPools] = (
    weakref.WeakKeyDictionary()
)


def _new_client(secure: bool) -> httpx2.AsyncClient:
    import httpx2

    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=100)
    if secure:
        return httpx2.AsyncClient(verify=shared_ssl_context(), http2=_has_h2(), limits=limits)
    return httpx2.AsyncClient(verify=False, limits=limits)


@functools.cache
def _has_h2() -> bool:
    try:
        import h2  # noqa: F401
    except ImportError:
        return False
    return True


async def _lifetime(pools: _LoopPools) -> AsyncGenerator[None, None]:
    """Suspended for the loop's life; the loop's async-generator shutdown closes the pool (and
    forgets it: a loop used again after that starts a new one)."""
    try:
        yield
    finally:
        _POOLS.pop(asyncio.get_running_loop(), None)
        await pools.aclose()


async def _loop_pools() -> _LoopPools:
    """The running loop's shared clients."""
    loop = asyncio.get_running_loop()
    pools = _POOLS.get(loop)
    if pools is None:
        pools = _POOLS[loop] = _LoopPools()
        pools.lifetime = _lifetime(pools)
        await pools.lifetime.__anext__()  # registers it with this loop's shutdown
    return pools


def _encode(body: dict[str, Any]) -> bytes:
    return fastjson.dumpb(body)


@contextlib.asynccontextmanager
async def opened(
    method: str,
    url: str,
    headers: Mapping[str, str],
    *,
    body: dict[str, Any] | None = None,
    seconds: float = 600.0,
    params: Mapping[str, str] | None = None,
) -> AsyncIterator[StreamedAnswer]:
    """Send (``body`` as JSON) and hold the answer open for streaming; an error status raises
    `HTTPStatusError`. The response is closed on exit, early exit and cancellation."""
    pools = await _loop_pools()
    content = None if body is None else _encode(body)
    sent = {"User-Agent": USER_AGENT, "Accept": "application/json", **headers}
    if content is not None:
        sent["Content-Type"] = "application/json"
    response: StreamedAnswer
    target = _direct_target(url, params)
    if target:
        response = await pools.direct.send(method, target, sent, content, seconds)
    else:
        client = pools.client(url[:6].lower() == "https:")
        request = _request(client, method, url, sent, content, params, seconds)
        origin = (request.url.scheme, request.url.host, request.url.port)
        await pools.drains.settle(origin)
        response = _KeptAlive(await _send(client, request), pools.drains, origin)
        request_sent()  # httpx2 tells no sooner than the answer's head
    try:
        if response.status_code >= 400:
            raise await _status_error(response)
        yield response
    finally:
        await response.aclose()


class _KeptAlive:
    """An httpx2 answer whose body iterator is kept: httpcore closes an HTTP/1.1 connection
    whose answer was not read to its end, so that end is read in the background (`drain`)
    before the answer is closed, and the connection stays in httpx2's pool. HTTP/2 streams
    need none of this."""

    def __init__(self, response: httpx2.Response, drains: Drains, origin: Hashable) -> None:
        self.response = response
        self.status_code = response.status_code
        self.headers = response.headers
        self._drains = drains
        self._origin = origin
        self._chunks: AsyncIterator[bytes] | None = None

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        self._chunks = self.response.aiter_bytes()
        return self._chunks

    async def aread(self) -> bytes:
        return await self.response.aread()

    async def aclose(self) -> None:
        response = self.response
        if response.is_closed or response.http_version != "HTTP/1.1":
            await response.aclose()
        else:
            self._drains.start(self._origin, self._read_to_end_and_close())

    async def _read_to_end_and_close(self) -> None:
        try:
            await read_to_end(self._chunks or self.response.aiter_bytes())
        finally:
            with contextlib.suppress(Exception):
                await self.response.aclose()


def post_json(
    url: str,
    body: dict[str, Any],
    headers: Mapping[str, str],
    *,
    seconds: float = 600.0,
    params: Mapping[str, str] | None = None,
) -> contextlib.AbstractAsyncContextManager[StreamedAnswer]:
    """`opened` for a POST of ``body``: the streamed answer."""
    return opened("POST", url, headers, body=body, seconds=seconds, params=params)


async def json_answer(method: str, url: str, headers: Mapping[str, str], **options: Any) -> Any:
    """The decoded JSON answer (its text when the server did not send JSON); ``options`` (body,
    seconds, params) as for `opened`."""
    async with opened(method, url, headers, **options) as answer:
        return _decoded(await answer.aread())


def _direct_target(url: str, params: Mapping[str, str] | None) -> Target | None:
    """Where talaria's own client sends ``url``: ``http://`` or ``https://``, no proxy
    configured, no user and password in the URL, HTTP/2 not asked for; None for what httpx2
    takes."""
    scheme = url[:6].lower()
    secure = scheme == "https:"
    if not secure and scheme[:5] != "http:":
        return None
    if any(map(os.environ.get, PROXY_VARIABLES[secure])):
        return None
    if secure and os.environ.get(HTTP2_VARIABLE, "") not in ("", "0"):
        return None
    return _plain_target(url, tuple(params.items()) if params else (), secure)


@functools.lru_cache(maxsize=256)
def _plain_target(url: str, params: tuple[tuple[str, str], ...], secure: bool) -> Target | None:
    """`_direct_target` past the proxy check; parsed once per URL (every step posts to the
    same one)."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if secure else 80)
    except ValueError as exc:
        raise BadURLError(f"bad URL {url!r}: {exc}") from exc
    if not parts.hostname:
        raise BadURLError(f"bad URL {url!r}: no host")
    if parts.username is not None:
        return None
    query = "&".join(filter(None, (parts.query, urlencode(params))))
    path = (parts.path or "/") + (f"?{query}" if query else "")
    return Target(parts.hostname, port, path, secure)


def _request(
    client: httpx2.AsyncClient,
    method: str,
    url: str,
    headers: Mapping[str, str],
    content: bytes | None,
    params: Mapping[str, str] | None,
    seconds: float,
) -> httpx2.Request:
    import httpx2

    try:
        urlsplit(url).port  # noqa: B018 (raises for a port out of range)
    except ValueError as exc:
        raise BadURLError(f"bad URL {url!r}: {exc}") from exc
    try:
        return client.build_request(
            method, url, content=content, headers=headers, params=params, timeout=seconds
        )
    except httpx2.InvalidURL as exc:
        raise BadURLError(f"bad URL {url!r}: {exc}") from exc


async def _send(client: httpx2.AsyncClient, request: httpx2.Request) -> httpx2.Response:
    """Send, holding the answer open. A failed connect names the host it tried, and trying
    several addresses that all fail (happy eyeballs) is one error, not an exception group."""
    import httpx2

    where = f"cannot connect to {request.url.host}:{request.url.port or request.url.scheme}"
    try:
        return await client.send(request, stream=True)
    except httpx2.ConnectError as exc:
        raise ConnectFailedError(f"{where}: {exc}") from exc
    except ExceptionGroup as group:
        reasons = dict.fromkeys(str(exc) or type(exc).__name__ for exc in group.exceptions)
        raise ConnectFailedError(f"{where}: {'; '.join(reasons)}") from group


async def _status_error(response: StreamedAnswer) -> HTTPStatusError:
    raw = b""
    with contextlib.suppress(Exception):
        async for chunk in response.aiter_bytes():
            raw += chunk
            if len(raw) >= MAX_ERROR_BODY:
                break
    return HTTPStatusError(response.status_code, _decoded(raw), response.headers)


def _decoded(raw: bytes) -> Any:
    text = raw.decode("utf-8", errors="replace")
    try:
        return fastjson.loads(text)
    except ValueError:
        return text
