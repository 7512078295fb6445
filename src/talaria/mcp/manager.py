"""The configured servers of one agent (and its children), on one background event loop.

The SDK's connections are anyio contexts that must live on one loop for their whole life,
while an agent's turns may run on different loops (its own, or a helper thread's). So the
manager keeps a private loop on a daemon thread and every call crosses over to it. Servers
start lazily, all at once, at the first turn; each has its own startup timeout, and one that
fails is reported and skipped while the rest work.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from talaria.mcp.config import ServerConfig
from talaria.mcp.connection import Confinement, ServerConnection
from talaria.mcp.names import sanitise
from talaria.messages.media import media_dir
from talaria.tools.sandbox import SandboxPolicy

T = TypeVar("T")
_CLOSE_TIMEOUT = 10.0


class MCPManager:
    def __init__(
        self,
        servers: list[ServerConfig],
        home: Path,
        sandbox: SandboxPolicy | None = None,
        cwd: Path | None = None,
    ) -> None:
        """`sandbox` and `cwd`: the session's, for the stdio servers set to `sandbox: true`."""
        from talaria import __version__

        self.home = home
        confinement = Confinement(sandbox or SandboxPolicy(home=home), cwd or Path.cwd())
        self.connections: dict[str, ServerConnection] = {
            server.name: ServerConnection(
                server,
                home / "logs" / "mcp" / f"{sanitise(server.name)}.log",
                __version__,
                confinement,
            )
            for server in servers
            if server.enabled
        }
        self.disabled = [server for server in servers if not server.enabled]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()
        self._started = False

    @property
    def media_dir(self) -> Path:
        return media_dir(self.home)

    # ---- crossing to the manager's loop ------------------------------------------------

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` on the manager's loop from any other loop (cancellation crosses too)."""
        return await asyncio.wrap_future(self.submit(coro))

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._guard:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=serve, name="talaria-mcp", daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    # ---- lifecycle --------------------------------------------------------------------

    async def start(self) -> list[str]:
        """Start every server not started yet, in parallel; one message per failure."""
        return await self.run(self.start_all())

    async def start_all(self) -> list[str]:
        if self._started:
            return []
        self._started = True
        pending = [c for c in self.connections.values() if c.status == "stopped"]
        outcomes = await asyncio.gather(*(c.start() for c in pending), return_exceptions=True)
        return [
            f"MCP server {c.config.name!r} {c.error or outcome}; its tools are not available"
            for c, outcome in zip(pending, outcomes, strict=True)
            if isinstance(outcome, BaseException)
        ]

    async def refresh(self) -> bool:
        """Re-list the servers that announced a change; True when any list was re-read."""
        return await self.run(self._refresh_all())

    async def _refresh_all(self) -> bool:
        results = await asyncio.gather(*(c.refresh() for c in self.connections.values()))
        return any(results)

    def close(self) -> None:
        """Stop every server and the manager's loop (idempotent)."""
        with self._guard:
            loop, thread, self._loop = self._loop, self._thread, None
        if loop is None:
            return

        async def stop_all() -> None:
            await asyncio.gather(*(c.stop() for c in self.connections.values()))

        try:
            asyncio.run_coroutine_threadsafe(stop_all(), loop).result(_CLOSE_TIMEOUT)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        finally:
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(_CLOSE_TIMEOUT)
            if not loop.is_running():
                loop.close()
        self._started = False
