"""A loopback TCP proxy in front of a real chat server, to break the network between the
gateway and its server on cue: stop a send half way (`hold`), or cut every connection at once
(`drop`), as a network or a restarting server does. It runs its own event loop in a thread,
so the gateway under test (in this process or another) sees an ordinary server."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

WAIT_S = 60.0


@dataclass
class _Link:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    swallowing: bool = False
    """The client's bytes stop here (the server never gets them)."""
    muted: bool = False
    """The server's bytes stop here (the client never hears back)."""
    tail: bytes = b""
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class TcpProxy:
    """Forwards 127.0.0.1:`port` to the server at 127.0.0.1:`target`."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self.held = 0
        """How many connections a `hold` has stopped."""
        self.connections = 0
        """How many connections were ever made to the proxy."""
        self.refusing = False
        """Close each new connection at once, as a server that is down (but still counted)."""
        self._marker = b""
        self._reply = False
        self._links: list[_Link] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        self._call(self._listen())
        return self

    def __exit__(self, *exc: object) -> None:
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)

    def hold(self, marker: bytes, *, reply: bool = False) -> None:
        """On the next client chunk that contains `marker`: keep that chunk and all the
        connection's later client bytes here; or, with `reply`, let the chunk through and
        keep what the server answers on that connection instead. `hold(b"")`: no more."""
        self._marker, self._reply = marker, reply

    def drop(self) -> None:
        """Cut every open connection, at both ends."""
        self._call(self._drop())

    async def until(self, check: Any, timeout: float = WAIT_S) -> Any:
        deadline = time.monotonic() + timeout
        while not (found := check()):
            assert time.monotonic() < deadline, "timed out waiting on the proxy"
            await asyncio.sleep(0.02)
        return found

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close(self) -> None:
        await self._drop()
        if self._server is not None:
            self._server.close()

    async def _drop(self) -> None:
        links, self._links = self._links, []
        for link in links:
            for task in link.tasks:
                task.cancel()
            link.client.close()
            link.server.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self.refusing:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return
        link = _Link(writer, up_writer)
        self._links.append(link)
        link.tasks = [
            asyncio.create_task(self._pump(link, reader, up_writer, upstream=True)),
            asyncio.create_task(self._pump(link, up_reader, writer, upstream=False)),
        ]

    async def _pump(
        self,
        link: _Link,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        upstream: bool,
    ) -> None:
        try:
            while chunk := await reader.read(65536):
                if upstream:
                    self._watch(link, chunk)
                if link.swallowing if upstream else link.muted:
                    continue
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:  # one end closed: close the other, as a real connection does
            link.client.close()
            link.server.close()

    def _watch(self, link: _Link, chunk: bytes) -> None:
        seen, link.tail = link.tail + chunk, chunk[-256:]
        if not self._marker or link.swallowing or link.muted or self._marker not in seen:
            return
        self.held += 1
        if self._reply:
            link.muted = True
        else:
            link.swallowing = True
