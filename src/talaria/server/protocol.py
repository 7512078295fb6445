"""uvicorn's HTTP/1.1 protocol (h11) with a deadline for every request head.

uvicorn closes a keep-alive connection that stays idle, but sets no limit on how long a client
may take to send a request's head (the request line and headers): one sending a byte at a time
holds its connection forever, and enough of them exhaust the server (slowloris). This protocol
closes a connection whose request head is not complete `header_timeout` seconds after the
connection opened or the head's first byte arrived. The deadline does not move while bytes
trickle in.
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class HeadDeadlineProtocol(H11Protocol):
    """Set `header_timeout` on a subclass (`with_head_deadline`); uvicorn builds one instance
    per connection from the class alone."""

    header_timeout: float = 10.0
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            self._arm()  # the head of a next request on a kept-alive connection starts here
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.header_timeout, self._head_overdue)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_overdue(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.logger.info("closing a connection that sent no whole request head in time")
            self.transport.close()


def with_head_deadline(seconds: float) -> type[HeadDeadlineProtocol]:
    """The protocol class to give `uvicorn.Config(http=...)`."""
    return type("HeadDeadlineProtocol", (HeadDeadlineProtocol,), {"header_timeout": seconds})
