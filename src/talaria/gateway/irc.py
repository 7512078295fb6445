"""IRC with the `irc` library's asyncio client (`talaria[irc]`).

The bot joins its channels and answers in them when addressed (`nick: ...`, a line that
names it, or the prefix), and in private messages. IRC has no edits, buttons, typing, ids or
redelivery: progress comes as one short line per tool, approvals as `/approve N` (or
`!approve N`, since IRC clients keep `/` for themselves), and a multi-line answer as one
line per line, each cut to fit the protocol's 512-byte line. The bot sends no files (DCC
is peer to peer and rarely passes firewalls): an answer naming one says it was not sent.
Users are known by nick: pair or allow nicks that the network's services protect.

Settings: `server`, `port` (6667), `nick`, `channels` (a list), `password` (the server's).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from irc.client import Event, ServerConnection
from irc.client_aio import AioReactor

from talaria.gateway.platform import Button, Capabilities, ChatRef, Inbound, PlatformError, Sink

log = logging.getLogger("talaria.gateway.irc")

LINE_BYTES = 400
"""What a PRIVMSG's text may take of the 512-byte line (the prefix and target take the rest)."""
PACE_S = 0.2
"""Between lines after the first few: servers cut off clients that flood."""
BURST = 4
CONNECT_WAIT_S = 30.0


class IrcPlatform:
    capabilities = Capabilities(max_len=LINE_BYTES * 8)

    def __init__(self, name: str, settings: Mapping[str, Any]) -> None:
        if not settings.get("server") or not settings.get("nick"):
            raise ValueError(f"gateway.platforms.{name}: server and nick are required")
        self.name = name
        self.server = str(settings["server"])
        self.port = int(settings.get("port", 6667))
        self.nick = str(settings["nick"])
        self.channels = [str(c) for c in settings.get("channels") or []]
        self.password = settings.get("password")
        self._ids = itertools.count(1)
        self._queue: asyncio.Queue[Inbound] = asyncio.Queue()
        self._welcomed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._conn: ServerConnection | None = None
        self._send_lock = asyncio.Lock()

    async def start(self, sink: Sink) -> None:
        reactor = AioReactor(loop=asyncio.get_running_loop())
        for kind in ("pubmsg", "privmsg"):
            reactor.add_global_handler(kind, self._on_message)
        reactor.add_global_handler("welcome", self._on_welcome)
        conn = reactor.server()
        await conn.connect(self.server, self.port, self.nick, password=self.password)
        self._conn = conn
        await asyncio.wait_for(self._welcomed.wait(), CONNECT_WAIT_S)
        self._task = asyncio.create_task(self._hand_over(sink))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._conn is not None and self._conn.is_connected():
            self._conn.quit("talaria gateway stopping")
            self._conn.disconnect()

    def _on_welcome(self, conn: ServerConnection, event: Event) -> None:
        for channel in self.channels:
            conn.join(channel)
        self._welcomed.set()

    def _on_message(self, conn: ServerConnection, event: Event) -> None:
        nick = event.source.nick if event.source else ""
        text = str(event.arguments[0]) if event.arguments else ""
        direct = event.type == "privmsg"
        where = nick if direct else str(event.target)
        addressed = re.match(rf"^\s*{re.escape(conn.get_nickname())}[:,]\s*", text, re.I)
        mentioned = bool(addressed) or bool(
            re.search(rf"\b{re.escape(conn.get_nickname())}\b", text, re.I)
        )
        self._queue.put_nowait(
            Inbound(
                ChatRef(self.name, where),
                f"{time.time_ns()}-{next(self._ids)}",  # IRC has no ids and never redelivers
                nick,
                text[addressed.end() :] if addressed else text,
                sender_name=nick,
                is_direct=direct,
                mentioned=mentioned,
            )
        )

    async def _hand_over(self, sink: Sink) -> None:
        while True:
            message = await self._queue.get()
            try:
                await sink(message)
            except Exception:  # IRC cannot deliver it again: the message is lost, say so
                log.exception("irc: a message from %s was not taken", message.sender_id)

    async def send(
        self,
        chat: ChatRef,
        text: str,
        *,
        key: str,
        buttons: Sequence[Button] = (),
        reply_to: str | None = None,
    ) -> str:
        conn = self._conn
        if conn is None or not conn.is_connected():
            raise ConnectionError("not connected to the IRC server")
        async with self._send_lock:
            for n, line in enumerate(irc_lines(text)):
                if n >= BURST:
                    await asyncio.sleep(PACE_S)
                conn.privmsg(chat.chat_id, line)
        return f"irc-{next(self._ids)}"

    async def edit(
        self, chat: ChatRef, message_id: str, text: str, *, buttons: Sequence[Button] = ()
    ) -> None:
        raise PlatformError("IRC messages cannot be edited (can_edit is False)")

    async def typing(self, chat: ChatRef) -> None:
        """IRC has no typing indicator."""


def irc_lines(text: str) -> list[str]:
    """`text` as PRIVMSG lines: one per line of text (blank ones dropped), each cut to at
    most `LINE_BYTES` bytes of UTF-8 without splitting a character."""
    lines = []
    for line in text.splitlines():
        data = line.encode()
        while len(data) > LINE_BYTES:
            cut = LINE_BYTES
            while cut and (data[cut] & 0xC0) == 0x80:  # not inside a character
                cut -= 1
            lines.append(data[:cut].decode())
            data = data[cut:]
        if data.strip():
            lines.append(data.decode())
    return lines


def create(name: str, settings: Mapping[str, Any]) -> IrcPlatform:
    return IrcPlatform(name, settings)
