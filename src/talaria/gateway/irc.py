"""IRC with the `irc` library's asyncio client (`talaria[irc]`).

The bot joins its channels and answers in them when addressed (`nick: ...`, a line that
names it, or the prefix), and in private messages. IRC has no edits, buttons, typing, ids or
redelivery: progress comes as one short line per tool, approvals as `/approve N` (or
`!approve N`, since IRC clients keep `/` for themselves), and a multi-line answer as one
line per line, each cut to fit the protocol's 512-byte line. The bot sends no files (DCC
is peer to peer and rarely passes firewalls): an answer naming one says it was not sent.
Users are known by nick: pair or allow nicks that the network's services protect.

IRC does not acknowledge a PRIVMSG, so an answer counts as sent once the server has answered
a PING sent after it (a server handles a client's lines in order): an answer cut off by a
crash or a dropped connection is still pending in the ledger and is sent again. When the
server drops the bot, it connects again with growing pauses and sends what waited; a nick
still held by the lost connection is taken with a `_` appended, and asked for again every
`nick_retry_s` until the server gives it back.

Settings: `server`, `port` (6667, or 6697 with `tls`), `tls` (false: TLS from the first
byte, the server's certificate and name checked), `nick`, `channels` (a list), `password`
(the server's). No SASL: see docs/gateway-irc.md.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import ssl
import time
from collections.abc import Mapping, Sequence
from typing import Any

from irc.client import Event, ServerConnection
from irc.client_aio import AioConnection, AioReactor
from irc.connection import AioFactory

from talaria.gateway.platform import (
    Button,
    Capabilities,
    ChatRef,
    Inbound,
    NotSent,
    PlatformError,
    Sink,
    end_tasks,
)

log = logging.getLogger("talaria.gateway.irc")

LINE_BYTES = 400
"""What a PRIVMSG's text may take of the 512-byte line (the prefix and target take the rest)."""
PACE_S = 0.2
"""Between lines after the first few: servers cut off clients that flood."""
BURST = 4
CONNECT_WAIT_S = 30.0
"""For the server's welcome after connecting, and for a send waiting on a reconnect."""
CONFIRM_S = 60.0
"""For the server's answer to the PING that follows an answer's lines."""
FIRST_RETRY_S = 1.0
MAX_RETRY_S = 60.0
NICK_RETRY_S = 60.0
"""Between requests for the bot's own nick while another connection holds it."""


class IrcPlatform:
    capabilities = Capabilities(max_len=LINE_BYTES * 8)

    def __init__(self, name: str, settings: Mapping[str, Any]) -> None:
        if not settings.get("server") or not settings.get("nick"):
            raise ValueError(f"gateway.platforms.{name}: server and nick are required")
        self.name = name
        self.server = str(settings["server"])
        self.tls = bool(settings.get("tls", False))
        self.port = int(settings.get("port", 6697 if self.tls else 6667))
        self.nick = str(settings["nick"])
        self.channels = [str(c) for c in settings.get("channels") or []]
        self.password = settings.get("password")
        self.nick_retry_s = float(settings.get("nick_retry_s", NICK_RETRY_S))
        self._ids = itertools.count(1)
        self._queue: asyncio.Queue[Inbound] = asyncio.Queue()
        self._welcomed = asyncio.Event()
        self._registered: asyncio.Future[None] | None = None
        """Set while connecting: done at the welcome, failed if the connection is lost."""
        self._pongs: dict[str, asyncio.Future[None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._reconnecting: asyncio.Task[None] | None = None
        self._regaining: asyncio.Task[None] | None = None
        self._stopping = False
        self._conn: AioConnection | None = None
        self._send_lock = asyncio.Lock()

    async def start(self, sink: Sink) -> None:
        reactor = AioReactor(loop=asyncio.get_running_loop())
        for kind in ("pubmsg", "privmsg"):
            reactor.add_global_handler(kind, self._on_message)
        reactor.add_global_handler("welcome", self._on_welcome)
        reactor.add_global_handler("pong", self._on_pong)
        reactor.add_global_handler("nicknameinuse", self._on_nick_taken)
        reactor.add_global_handler("disconnect", self._on_disconnect)
        self._conn = reactor.server()
        await self._connect(self._conn)
        self._task = asyncio.create_task(self._hand_over(sink))

    async def stop(self) -> None:
        self._stopping = True
        await end_tasks(self._task, self._reconnecting, self._regaining)
        if self._conn is not None and self._conn.is_connected():
            self._conn.quit("talaria gateway stopping")
            self._conn.disconnect()

    async def _connect(self, conn: AioConnection) -> None:
        """Connect and register; raises when the connection is lost first or the server
        does not welcome the bot in time."""
        self._welcomed.clear()
        registered = self._registered = asyncio.get_running_loop().create_future()
        factory = (
            AioFactory(ssl=_tls_context(), server_hostname=self.server)
            if self.tls
            else AioFactory()
        )
        await conn.connect(
            self.server, self.port, self.nick, password=self.password, connect_factory=factory
        )
        try:
            await asyncio.wait_for(registered, CONNECT_WAIT_S)
        except TimeoutError:
            if conn.is_connected():
                conn.disconnect()
            raise

    async def _reconnect(self, conn: AioConnection) -> None:
        """Connect again after the server dropped the bot, waiting longer after each failure."""
        pause = FIRST_RETRY_S
        while not self._stopping:
            await asyncio.sleep(pause)
            try:
                await self._connect(conn)
            except (OSError, TimeoutError) as exc:
                log.warning("irc %s: reconnecting failed (%s); next try in %.0f s",
                            self.name, exc, pause)  # fmt: skip
                pause = min(pause * 2, MAX_RETRY_S)
                continue
            log.warning("irc %s: connected again as %s", self.name, conn.get_nickname())
            return

    def _on_welcome(self, conn: ServerConnection, event: Event) -> None:
        for channel in self.channels:
            conn.join(channel)
        if not self._has_own_nick(conn) and (self._regaining is None or self._regaining.done()):
            self._regaining = asyncio.create_task(self._regain_nick(conn))
        self._welcomed.set()
        if self._registered is not None and not self._registered.done():
            self._registered.set_result(None)

    def _has_own_nick(self, conn: ServerConnection) -> bool:
        return str(conn.get_nickname()).lower() == self.nick.lower()

    async def _regain_nick(self, conn: ServerConnection) -> None:
        """Ask for the configured nick now and then until the server gives it back (the lost
        connection that held it times out): people write to the bot by that nick."""
        while not self._has_own_nick(conn):
            await asyncio.sleep(self.nick_retry_s)
            if self._welcomed.is_set() and not self._has_own_nick(conn):
                conn.nick(self.nick)
        log.warning("irc %s: the nick %s is the bot's again", self.name, self.nick)

    def _on_nick_taken(self, conn: ServerConnection, event: Event) -> None:
        """Before the welcome (a lost connection may hold the nick a while): the next one."""
        if not self._welcomed.is_set() and event.arguments:
            conn.nick(f"{event.arguments[0]}_")

    def _on_pong(self, conn: ServerConnection, event: Event) -> None:
        waiting = self._pongs.get(str(event.arguments[-1]) if event.arguments else "")
        if waiting is not None and not waiting.done():
            waiting.set_result(None)

    def _on_disconnect(self, conn: ServerConnection, event: Event) -> None:
        was_welcomed = self._welcomed.is_set()
        self._welcomed.clear()
        if self._registered is not None and not self._registered.done():
            self._registered.set_exception(ConnectionError("the IRC server closed the connection"))
        for waiting in self._pongs.values():
            if not waiting.done():
                waiting.set_exception(ConnectionError("the IRC server dropped the connection"))
        if self._stopping or not was_welcomed or not isinstance(conn, AioConnection):
            return  # stopping, or a failed attempt that `_reconnect` retries itself
        log.warning("irc %s: the server dropped the connection; reconnecting", self.name)
        self._reconnecting = asyncio.create_task(self._reconnect(conn))

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
        async with self._send_lock:
            conn = await self._connected()
            for n, line in enumerate(irc_lines(text)):
                if n >= BURST:
                    await asyncio.sleep(PACE_S)
                conn.privmsg(chat.chat_id, line)
            await self._confirm(conn)
        return f"irc-{next(self._ids)}"

    async def _connected(self) -> ServerConnection:
        """The connection once the server has welcomed the bot (waiting out a reconnect);
        `NotSent` when it stays down."""
        try:
            await asyncio.wait_for(self._welcomed.wait(), CONNECT_WAIT_S)
        except TimeoutError:
            raise NotSent("not connected to the IRC server") from None
        assert self._conn is not None
        return self._conn

    async def _confirm(self, conn: ServerConnection) -> None:
        """Until the server has answered a PING sent after what came before (it has those
        lines then); ConnectionError when the connection is lost first."""
        token = f"talaria-{next(self._ids)}"
        answered = self._pongs[token] = asyncio.get_running_loop().create_future()
        try:
            conn.ping(token)
            await asyncio.wait_for(answered, CONFIRM_S)
        finally:
            del self._pongs[token]

    async def edit(
        self, chat: ChatRef, message_id: str, text: str, *, buttons: Sequence[Button] = ()
    ) -> None:
        raise PlatformError("IRC messages cannot be edited (can_edit is False)")

    async def typing(self, chat: ChatRef, *, active: bool = True) -> None:
        """IRC has no typing indicator."""


def _tls_context() -> ssl.SSLContext:
    """The system's trusted certificates (or `SSL_CERT_FILE`'s), host names checked."""
    return ssl.create_default_context()


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
