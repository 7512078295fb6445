"""Shared plumbing for adapters built on the official SDKs.

Two facts every adapter has to respect live here once:

* The SDKs' high-level methods (``chat.completions.create(messages=...)``) walk every message
  through a TypedDict transform on each call: O(history) per call. `openai_post` uses the
  low-level ``client.post`` with a prebuilt body and keeps what we want from the SDK (auth,
  error mapping, SSE parsing) without the transform.
* An SDK client owns an httpx connection pool bound to the event loop that first used it.
  `LoopBoundClient` makes a fresh client when it is used from a different loop (e.g. one
  ``asyncio.run`` per synchronous ``agent.chat``), instead of failing with "Event loop is closed".

The SDKs are imported inside functions so that ``import talaria`` stays fast.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
from collections.abc import AsyncGenerator, Callable
from typing import Any


class LoopBoundClient:
    """Creates an SDK client on first use, and again whenever the running event loop changes."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = self._factory()
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            await client.close()
        self._loop = None


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """One verified TLS context per process: loading the CA bundle costs tens of ms and close
    to a megabyte, which every agent used to pay (twice) on its first turn."""
    return ssl.create_default_context()


def tls_verify(base_url: str) -> ssl.SSLContext | bool:
    """What the HTTP client verifies with: the shared context, or nothing for plain http://
    (no TLS happens, so no CA bundle needs loading)."""
    return shared_ssl_context() if base_url.lower().startswith("https") else False


def sdk_http_client(sdk: Any, base_url: str) -> Any:
    """The SDK's own default async HTTP client (its timeouts and limits), with the shared
    TLS context."""
    return sdk.DefaultAsyncHttpxClient(verify=tls_verify(base_url))


def openai_client(
    *,
    base_url: str,
    api_key: str | None,
    timeout: float,
    default_headers: dict[str, str] | None = None,
) -> Any:
    """An ``openai.AsyncOpenAI`` without SDK retries (talaria has its own retry layer)."""
    import openai

    return openai.AsyncOpenAI(
        base_url=base_url,
        api_key=api_key,
        timeout=timeout,
        max_retries=0,
        default_headers=default_headers,
        http_client=sdk_http_client(openai, base_url),
    )


JSON_CONTENT: Any = {"headers": {"Content-Type": "application/json"}}


def encode_json(body: dict[str, Any]) -> bytes:
    """The request body as bytes, so the SDK sends it as is instead of re-walking it."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


async def openai_post_json(client: Any, path: str, body: dict[str, Any]) -> Any:
    """POST a prebuilt body; the decoded JSON answer (a str when the server did not send JSON)."""
    return await client.post(path, content=encode_json(body), options=JSON_CONTENT, cast_to=object)


async def openai_post_stream(
    client: Any, path: str, body: dict[str, Any]
) -> AsyncGenerator[dict[str, Any], None]:
    """POST a prebuilt body and yield each SSE event's JSON data as a plain dict.

    The SDK raises its own errors for HTTP failures and for ``{"error": ...}`` events; the
    response is closed even when the consumer stops early or is cancelled.
    """
    import openai

    stream = await client.post(
        path,
        content=encode_json(body),
        options=JSON_CONTENT,
        cast_to=object,
        stream=True,
        stream_cls=openai.AsyncStream[object],
    )
    try:
        async for event in stream:
            yield event
    finally:
        await stream.close()
