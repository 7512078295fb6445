"""One MCP server: connect (stdio, streamable HTTP or HTTP+SSE), list, call, reconnect.

Runs on the manager's event loop. The SDK's client is an anyio context, so one long-lived task
enters it and holds it until `stop()`; calls from any task go through `call()`. Tool-list
changes arrive as `notifications/tools/list_changed` (handshake-era servers) or on a
`subscriptions/listen` stream (2026-07-28 servers) and only mark the list stale: the manager
re-lists between turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TextIO

from talaria.mcp.config import ServerConfig, expanded
from talaria.mcp.limits import Offer, offer
from talaria.tools.base import ToolError
from talaria.tools.sandbox import SandboxPolicy, confine

log = logging.getLogger("talaria.mcp")

_LIST_PAGES = 50
_LIST_CHANGED = "notifications/tools/list_changed"
_PROMPTS_CHANGED = "notifications/prompts/list_changed"


class ServerUnavailable(Exception):
    """The server could not be reached or stopped answering; the message says why."""


@dataclass(frozen=True)
class Confinement:
    """The session's sandbox settings and folder, for stdio servers set to `sandbox:`."""

    policy: SandboxPolicy
    cwd: Path

    def prefix(self, server: ServerConfig) -> list[str]:
        """The argv prefix (bubblewrap's) that runs `server` inside the sandbox. The server
        asked for it, so a machine without the sandbox does not start it."""
        mode = self.policy.mode if server.sandbox == "session" else str(server.sandbox)
        if mode == "full-access":
            mode = "workspace-write"
        cwd = Path(server.cwd) if server.cwd else self.cwd
        policy = SandboxPolicy.resolve(
            cwd,
            mode=mode,
            network=self.policy.network,
            writable_roots=self.policy.writable_roots,
            required=True,
            home=self.policy.home,
        )
        try:
            return confine(policy, cwd)
        except ToolError as exc:
            raise ServerUnavailable(
                f"not started: it is set to run in the sandbox, which is unavailable ({exc})"
            ) from None


class ServerConnection:
    def __init__(
        self,
        config: ServerConfig,
        log_path: Path,
        client_version: str,
        confinement: Confinement | None = None,
    ) -> None:
        self.config = config
        self.confinement = confinement or Confinement(SandboxPolicy(), Path.cwd())
        self.log_path = log_path
        self.client_version = client_version
        self.status = "stopped"
        """stopped | starting | ready | failed | crashed"""
        self.error: str | None = None
        self.tools: list[Any] = []
        self.offer = Offer(())
        """The tools that may be offered to the model (`limits`), from the last listing."""
        self.prompts: list[Any] = []
        self.offers_resources = False
        self.stale = False
        """A list-changed notice arrived; the manager re-lists at the next turn."""
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock = asyncio.Lock()

    # ---- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Connect and list the tools within `startup_timeout`; raise ServerUnavailable."""
        self.status, self.error = "starting", None
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._hold(ready), name=f"mcp-{self.config.name}")
        timeout = self.config.startup_timeout
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            ready.cancel()
            await self.stop()
            self._fail("failed", f"did not start within {timeout:g} s")
        except Exception as exc:
            await self.stop()
            self._fail("failed", f"could not start: {describe_error(exc)}")

    async def ensure_started(self) -> None:
        """Start (or restart after a crash) unless the server is already connected."""
        async with self._lock:
            if self.status != "ready" or self._client is None:
                await self.start()

    async def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
        task, self._task = self._task, None
        if task is not None and not task.done():
            if self._client is None:  # still connecting: nothing to close politely
                task.cancel()
            _, pending = await asyncio.wait({task}, timeout=5)
            if pending:
                task.cancel()
                await asyncio.wait({task}, timeout=5)
        self._client = None
        if self.status in ("ready", "starting"):
            self.status = "stopped"

    def _fail(self, status: str, message: str) -> None:
        self.status, self.error = status, message
        raise ServerUnavailable(message)

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        """Own the client context for the connection's whole life."""
        try:
            async with self._open() as client:
                await self._load(client)
                self._client = client
                self.status = "ready"
                ready.set_result(None)
                assert self._stop is not None
                async with _listening(client, self._mark_stale):
                    await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(
                    exc if isinstance(exc, Exception) else ServerUnavailable("stopped")
                )
            elif self._stop is not None and not self._stop.is_set():
                self.status, self.error = "crashed", describe_error(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._client = None

    @contextlib.asynccontextmanager
    async def _open(self) -> AsyncIterator[Any]:
        from mcp import Client
        from mcp.types import Implementation

        server = expanded(self.config)
        async with contextlib.AsyncExitStack() as stack:
            target = await self._target(server, stack)
            client = Client(
                target,
                mode=server.protocol,
                message_handler=self._on_message,
                client_info=Implementation(name="talaria", version=self.client_version),
                cache=None,
            )
            yield await stack.enter_async_context(client)

    async def _target(self, server: ServerConfig, stack: contextlib.AsyncExitStack) -> Any:
        """What the SDK client connects to: a launched process, or an HTTP transport whose
        headers (tokens) stay inside the HTTP client and out of every log."""
        if server.command:
            from mcp import StdioServerParameters, stdio_client

            argv = [server.command, *server.args]
            if server.sandbox:
                argv = [*self.confinement.prefix(server), *argv]
            params = StdioServerParameters(
                command=argv[0],
                args=argv[1:],
                env=dict(server.env) or None,
                cwd=server.cwd,
            )
            errlog = self.errlog()
            return _Transport(stdio_client(params, errlog=errlog), errlog)
        if server.sse:
            from mcp.client.sse import sse_client

            return _Transport(sse_client(str(server.url), headers=dict(server.headers)), None)
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = await stack.enter_async_context(create_mcp_http_client(headers=dict(server.headers)))
        return _Transport(streamable_http_client(str(server.url), http_client=http), None)

    async def _load(self, client: Any) -> None:
        capabilities = client.server_capabilities
        self.tools = await _list_all(client.list_tools, "tools") if capabilities.tools else []
        self.offer = offer(self.config, self.tools)
        self.prompts = (
            await _list_all(client.list_prompts, "prompts") if capabilities.prompts else []
        )
        self.offers_resources = capabilities.resources is not None
        self.stale = False

    async def _on_message(self, message: Any) -> None:
        if getattr(message, "method", None) in (_LIST_CHANGED, _PROMPTS_CHANGED):
            self._mark_stale()

    def _mark_stale(self) -> None:
        self.stale = True

    async def refresh(self) -> bool:
        """Re-list after a change notice; True when the tools or prompts were re-read."""
        if not self.stale or self._client is None:
            return False
        try:
            await self._load(self._client)
        except Exception as exc:
            log.warning("mcp server %s: re-listing failed: %s", self.config.name, exc)
            return False
        return True

    # ---- calls ------------------------------------------------------------------------

    async def call(self, method: Callable[[Any], Awaitable[Any]]) -> Any:
        """Run `method(client)`, restarting a crashed server first; a failure that is the
        connection's (not the tool's) marks it crashed so the next call restarts it."""
        await self.ensure_started()
        client = self._client
        if client is None:
            raise ServerUnavailable(self.error or "not connected")
        try:
            return await method(client)
        except TimeoutError:
            raise
        except Exception as exc:
            if self._alive() and not _connection_lost(exc):
                raise
            error = describe_error(exc)
            await self.stop()
            self.status, self.error = "crashed", error
            raise ServerUnavailable(f"the server stopped answering ({error})") from None

    def _alive(self) -> bool:
        return self._task is not None and not self._task.done() and self.status == "ready"

    def errlog(self) -> TextIO:
        """The server's stderr goes here (logs/mcp/<server>.log), never to the terminal."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        return open(self.log_path, "a", encoding="utf-8")  # closed with the transport


class _Transport:
    """A transport context with an optional file to close after it (the stderr log)."""

    def __init__(self, inner: Any, closing: IO[str] | None) -> None:
        self.inner, self.closing = inner, closing

    async def __aenter__(self) -> Any:
        return await self.inner.__aenter__()

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self.inner.__aexit__(*exc)
        finally:
            if self.closing is not None:
                self.closing.close()


@contextlib.asynccontextmanager
async def _listening(client: Any, on_change: Callable[[], None]) -> AsyncIterator[None]:
    """On 2026-07-28 connections, a `subscriptions/listen` stream for list changes."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        yield
        return

    async def listen() -> None:
        try:
            async with client.listen(tools_list_changed=True, prompts_list_changed=True) as sub:
                async for _event in sub:
                    on_change()
        except Exception as exc:
            log.debug("mcp listen stream ended: %s", exc)

    task = asyncio.create_task(listen())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task


async def _list_all(fetch: Callable[..., Awaitable[Any]], field: str) -> list[Any]:
    items: list[Any] = []
    cursor = None
    for _ in range(_LIST_PAGES):
        page = await fetch(cursor=cursor)
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


def _connection_lost(exc: BaseException) -> bool:
    """The transport broke (process gone, stream closed, HTTP unreachable), not the request."""
    import anyio
    from mcp_types.jsonrpc import CONNECTION_CLOSED

    if getattr(exc, "code", None) == CONNECTION_CLOSED:
        return True
    broken = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError)
    return isinstance(exc, broken) or type(exc).__module__.startswith("httpx")


def describe_error(exc: BaseException) -> str:
    """One readable line; exception groups (anyio) are unwrapped to their first cause."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
