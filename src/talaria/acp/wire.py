"""The stdio wire as asyncio streams, for pipes (what editors give) and plain files alike.

Pipes and sockets get asyncio's own non-blocking transports. A regular file (`talaria acp <
requests.jsonl > out.jsonl` when debugging) cannot be watched by the loop, so it is read by a
thread and written synchronously.
"""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from typing import IO, Any, BinaryIO

READ_LIMIT = 50 * 1024 * 1024
"""Large enough for prompts with embedded files and images."""


class _FlowControl(asyncio.streams.FlowControlMixin):
    """Writes wait (drain) while the editor is slow to read."""


class _FileWriteTransport(asyncio.WriteTransport):
    def __init__(self, out: BinaryIO) -> None:
        super().__init__()
        self._out = out
        self._closing = False

    def write(self, data: Any) -> None:
        if not self._closing:
            self._out.write(bytes(data))
            self._out.flush()

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True

    def can_write_eof(self) -> bool:
        return False


def _is_stream(handle: IO[Any]) -> bool:
    mode = os.fstat(handle.fileno()).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


async def open_wire(
    incoming: IO[bytes], outgoing: BinaryIO
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    if _is_stream(incoming):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), incoming)
    else:
        _feed_from_thread(loop, incoming, reader)
    protocol = _FlowControl()
    transport: asyncio.WriteTransport
    if _is_stream(outgoing):
        transport, _ = await loop.connect_write_pipe(lambda: protocol, outgoing)
    else:
        transport = _FileWriteTransport(outgoing)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


def _feed_from_thread(
    loop: asyncio.AbstractEventLoop, incoming: IO[bytes], reader: asyncio.StreamReader
) -> None:
    def feed() -> None:
        try:
            while line := incoming.readline():
                loop.call_soon_threadsafe(reader.feed_data, line)
        finally:
            loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=feed, name="talaria-acp-stdin", daemon=True).start()
