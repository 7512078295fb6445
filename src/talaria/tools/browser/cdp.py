"""A Chrome DevTools Protocol connection over Chromium's websocket (the `websockets` client).

One connection carries the browser's own commands and, in flat mode, every attached tab's
(a message's `sessionId` names the tab). Commands are answered by id; events go to the
listeners in the order they arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from talaria.tools.base import ToolError

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

Listener = Callable[[str, dict[str, Any], str | None], None]
"""(method, params, session id or None for the browser) of one event."""

MAX_MESSAGE = 256 * 1024 * 1024
"""Screenshots and accessibility trees of large pages are big single messages."""


class CDPError(ToolError):
    """A command the browser refused or could not answer."""


class Connection:
    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.listeners: list[Listener] = []
        self.closed = False
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def open(cls, url: str) -> Connection:
        from websockets.asyncio.client import connect

        socket = await connect(
            url, proxy=None, max_size=MAX_MESSAGE, ping_interval=None, compression=None
        )
        return cls(socket)

    async def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        """The result of one command; a `CDPError` with the browser's message if it failed."""
        if self.closed:
            raise CDPError("the browser has closed")
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[ident] = answer
        try:
            await self._socket.send(json.dumps(message))
            async with asyncio.timeout(timeout):
                return await answer
        except TimeoutError:
            raise CDPError(f"the browser did not answer {method} within {timeout:g} s") from None
        except OSError as exc:
            raise CDPError(f"the browser connection failed: {exc}") from None
        finally:
            self._pending.pop(ident, None)

    async def _read(self) -> None:
        try:
            async for raw in self._socket:
                message = json.loads(raw)
                ident = message.get("id")
                if ident is None:
                    for listener in list(self.listeners):
                        listener(
                            message.get("method", ""),
                            message.get("params") or {},
                            message.get("sessionId"),
                        )
                    continue
                answer = self._pending.get(ident)
                if answer is None or answer.done():
                    continue
                if "error" in message:
                    answer.set_exception(CDPError(str(message["error"].get("message", "error"))))
                else:
                    answer.set_result(message.get("result") or {})
        except Exception:  # the socket closed under us: every waiting command fails below
            pass
        finally:
            self.closed = True
            for answer in self._pending.values():
                if not answer.done():
                    answer.set_exception(CDPError("the browser has closed"))

    async def close(self) -> None:
        self.closed = True
        with contextlib.suppress(Exception):
            await self._socket.close()
        self._reader.cancel()
