"""XMPP (Jabber), through slixmpp (`talaria[xmpp]`): one-to-one chats and multi-user rooms.

The bot is an ordinary account on any XMPP server (docs/gateway-xmpp.md). Direct messages are
one-to-one chats; the rooms listed in `rooms` are joined under `nick`, and there the bot is
addressed by its nick. Edits are Last Message Corrections (XEP-0308) and the typing indicator
is a chat state (XEP-0085), both shown by the common clients. A file sent back goes through
the server's HTTP upload service (XEP-0363) and arrives as a link marked as a file
(XEP-0066); a file a user sends that way (in a one-to-one chat) is downloaded from its
link. XMPP has no buttons, so a question is answered with `/approve ID` or `/deny ID`.
Updates reach the gateway one at a time, in the order the server sent them.

A message or correction counts as sent once the server has answered a ping (XEP-0199) sent
after it: the server has it then. When the server drops the bot, it connects again with
growing pauses (and joins its rooms again); a send waits for that, or fails with `NotSent`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import io
import logging
import mimetypes
import re
import urllib.parse
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from talaria.gateway import files
from talaria.gateway.adapter_settings import read_settings
from talaria.gateway.platform import (
    Attachment,
    Button,
    Capabilities,
    ChatRef,
    Inbound,
    NotSent,
    PlatformError,
    Sink,
    end_tasks,
)

log = logging.getLogger(__name__)

PLUGINS = ("xep_0030", "xep_0045", "xep_0066", "xep_0085", "xep_0199", "xep_0203", "xep_0308",
           "xep_0359", "xep_0363")  # fmt: skip
"""Discovery, rooms, out-of-band links, chat states, ping, delayed delivery, corrections,
stanza ids, HTTP upload."""
START_S = 60.0
CONNECT_WAIT_S = 30.0
"""How long a send waits for the bot to be back after the server dropped it."""
CONFIRM_S = 30.0
FIRST_RETRY_S = 1.0
MAX_RETRY_S = 60.0


@dataclass(frozen=True, slots=True)
class XmppSettings:
    """`gateway.platforms.<name>` for `type: xmpp`."""

    jid: str
    password: str
    host: str = ""
    """The server to connect to (default: found from the JID's domain through DNS)."""
    port: int = 5222
    tls: str = "starttls"
    """`starttls`, `direct` (TLS from the first byte) or `none` (a server on this machine)."""
    rooms: tuple[str, ...] = field(default=())
    """Multi-user chat rooms to join (`room@conference.example.org`)."""
    nick: str = "talaria"
    resource: str = "gateway"

    @classmethod
    def parse(cls, settings: Mapping[str, Any]) -> XmppSettings:
        rooms = tuple(settings.get("rooms") or ())
        tls = {"tls": ("starttls", "direct", "none")}
        return read_settings(cls, {**settings, "rooms": rooms}, "xmpp", ("jid", "password"), tls)


class XmppPlatform:
    capabilities = Capabilities(can_edit=True, max_len=10000, typing=True)

    def __init__(self, name: str, settings: XmppSettings) -> None:
        self.name = name
        self.settings = settings
        self._client: Any = None
        self._sink: Sink | None = None
        self._queue: asyncio.Queue[Inbound] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._online = asyncio.Event()
        """Set while a session is up (rooms joined); cleared when the connection is lost."""
        self._reconnecting: asyncio.Task[None] | None = None
        self._pause = FIRST_RETRY_S
        self._stopping = False
        self._mention = re.compile(rf"(?<![\w@]){re.escape(settings.nick)}\b", re.IGNORECASE)

    # ---- connecting and receiving ---------------------------------------------------------

    async def start(self, sink: Sink) -> None:
        from slixmpp import JID, ClientXMPP

        s = self.settings
        client = ClientXMPP(f"{s.jid}/{s.resource}", s.password)
        for plugin in PLUGINS:
            client.register_plugin(plugin)
        client.enable_direct_tls = s.tls == "direct"
        client.enable_starttls = s.tls == "starttls"
        client.enable_plaintext = s.tls == "none"
        if s.tls == "none":  # a server on this machine: no TLS to protect the password with
            client.plugin["feature_mechanisms"].unencrypted_scram = True
            client.plugin["feature_mechanisms"].unencrypted_plain = True
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def session_start(_: Any) -> None:
            try:
                client.send_presence()
                await client.get_roster()
                for room in s.rooms:
                    await client.plugin["xep_0045"].join_muc_wait(JID(room), s.nick, maxstanzas=0)
                self._online.set()
                self._pause = FIRST_RETRY_S
                if not ready.done():
                    ready.set_result(None)
                else:
                    log.warning("xmpp %s: connected again", self.name)
            except Exception as error:
                if not ready.done():
                    ready.set_exception(error)

        def failed(_: Any) -> None:
            if not ready.done():
                ready.set_exception(PlatformError(f"xmpp: the server refused {s.jid}'s login"))

        client.add_event_handler("session_start", session_start)
        client.add_event_handler("failed_all_auth", failed)
        client.add_event_handler("disconnected", self._on_disconnected)
        client.add_event_handler("message", self._on_message)
        client.add_event_handler("groupchat_message", self._on_room_message)
        self._client, self._sink = client, sink
        self._task = asyncio.create_task(self._deliver(), name=f"xmpp-{self.name}")
        client.connect(s.host or None, s.port if s.host else None)
        try:
            await asyncio.wait_for(ready, START_S)
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        self._stopping = True
        await end_tasks(self._task, self._reconnecting)
        if self._client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._client.disconnect(), 10)
        self._sink = None

    def _on_disconnected(self, reason: Any) -> None:
        was_online = self._online.is_set()
        self._online.clear()
        if self._stopping or (self._reconnecting is not None and not self._reconnecting.done()):
            return
        if was_online:
            log.warning("xmpp %s: the server dropped the connection (%s)", self.name, reason)
        self._reconnecting = asyncio.create_task(self._reconnect())

    async def _reconnect(self) -> None:
        """Connect again after a pause that doubles while attempts fail (a session that
        starts resets it); slixmpp itself retries a connection that cannot be made."""
        await asyncio.sleep(self._pause)
        self._pause = min(self._pause * 2, MAX_RETRY_S)
        if not self._stopping:
            s = self.settings
            self._client.connect(s.host or None, s.port if s.host else None)

    async def _deliver(self) -> None:
        while True:
            inbound = await self._queue.get()
            if self._sink is not None:
                try:
                    await self._sink(inbound)
                except Exception:
                    log.exception(
                        "xmpp %s: the gateway failed on %s", self.name, inbound.message_id
                    )

    def _on_message(self, msg: Any) -> None:
        if msg["type"] not in ("chat", "normal") or not msg["body"]:
            return
        if msg["replace"]["id"]:
            return  # a user's correction of a message that was answered already
        sender = msg["from"].bare
        if sender == self.settings.jid:
            return
        chat = ChatRef(self.name, sender)
        attachments = self._linked_file(msg)
        text = "" if attachments else msg["body"]
        self._queue.put_nowait(
            Inbound(chat, inbound_id(msg, sender), sender, text, sender_name=msg["from"].user,
                    is_direct=True, attachments=attachments)
        )  # fmt: skip

    def _linked_file(self, msg: Any) -> tuple[Attachment, ...]:
        """A file a client sent as clients do: its upload link as the whole body, marked as a
        file (XEP-0066); downloaded only when the gateway fetches it."""
        url = str(msg["oob"]["url"] or "")
        if not url or msg["body"].strip() != url:
            return ()
        name = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
        mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return (Attachment(name, mime, url=url, fetch=functools.partial(self.fetch_file, url)),)

    async def fetch_file(self, url: str) -> bytes:
        """The bytes behind a file's link (http or https only)."""
        return await files.download(url)

    def _on_room_message(self, msg: Any) -> None:
        room, nick = msg["from"].bare, msg["mucnick"]
        if not msg["body"] or nick == self.settings.nick or msg["replace"]["id"]:
            return
        if msg["delay"]["stamp"] is not None:
            return  # the room's history, replayed on join: said before the bot was there
        muc = self._client.plugin["xep_0045"]
        real = muc.get_jid_property(room, nick, "jid")
        sender = str(real.bare) if real else f"{room}/{nick}"
        message_id = inbound_id(msg, f"{room}/{nick}")
        self._queue.put_nowait(
            Inbound(ChatRef(self.name, room), message_id, sender, msg["body"],
                    sender_name=nick, mentioned=bool(self._mention.search(msg["body"])))
        )  # fmt: skip

    # ---- sending ---------------------------------------------------------------------------

    async def send(
        self,
        chat: ChatRef,
        text: str,
        *,
        key: str,
        buttons: Sequence[Button] = (),
        reply_to: str | None = None,
    ) -> str:
        message_id = _sent_id(key)
        await self._online_now()
        self._message(chat, text, message_id).send()
        await self._confirm()
        return message_id

    async def edit(
        self, chat: ChatRef, message_id: str, text: str, *, buttons: Sequence[Button] = ()
    ) -> None:
        await self._online_now()
        correction = self._message(chat, text, f"talaria-{uuid.uuid4().hex[:24]}")
        correction["replace"]["id"] = message_id
        correction.send()
        await self._confirm()

    async def typing(self, chat: ChatRef, *, active: bool = True) -> None:
        """`<composing/>` while a turn runs; `<active/>` after it (XEP-0085: the bot is
        present in the conversation, no longer writing)."""
        if not self._is_room(chat) and self._online.is_set():
            notice = self._client.make_message(mto=chat.chat_id, mtype="chat")
            notice["chat_state"] = "composing" if active else "active"
            notice.send()

    async def send_file(
        self, chat: ChatRef, path: Path, *, key: str, reply_to: str | None = None
    ) -> str:
        """Upload the file to the server's HTTP upload service (XEP-0363) and send its link,
        marked as a file (XEP-0066) so that clients show it inline."""
        from slixmpp.plugins.xep_0363.http_upload import FileTooBig, UploadServiceNotFound

        data = await asyncio.to_thread(path.read_bytes)
        message = self._message(chat, "", _sent_id(key))  # not connected: raises now
        try:
            url = await self._client.plugin["xep_0363"].upload_file(
                path.name, len(data), files.mime_type(path.name, data),
                input_file=io.BytesIO(data), timeout=60,
            )  # fmt: skip
        except UploadServiceNotFound:
            raise PlatformError("xmpp: the server offers no HTTP upload (XEP-0363)") from None
        except FileTooBig as error:
            raise PlatformError(f"xmpp: {error}") from None
        message["body"] = url
        message["oob"]["url"] = url
        message.send()
        return str(message["id"])

    async def _online_now(self) -> None:
        """Until a session is up (waiting out a reconnect); `NotSent` if it stays down."""
        try:
            await asyncio.wait_for(self._online.wait(), CONNECT_WAIT_S)
        except TimeoutError:
            raise NotSent(f"xmpp {self.name}: not connected") from None

    async def _confirm(self) -> None:
        """Until the server answers a ping sent after what came before (it has that then)."""
        from slixmpp.exceptions import IqTimeout

        try:
            await self._client.plugin["xep_0199"].ping(timeout=CONFIRM_S)
        except IqTimeout:
            raise ConnectionError(f"xmpp {self.name}: the server did not answer") from None

    def _message(self, chat: ChatRef, text: str, message_id: str) -> Any:
        if self._client is None or not self._online.is_set():
            raise NotSent(f"xmpp {self.name}: not connected")
        room = self._is_room(chat)
        message = self._client.make_message(
            mto=chat.chat_id, mbody=text, mtype="groupchat" if room else "chat"
        )
        message["id"] = message_id
        if not room:
            message["chat_state"] = "active"
        return message

    def _is_room(self, chat: ChatRef) -> bool:
        return chat.chat_id in self.settings.rooms


def _sent_id(key: str) -> str:
    """The id of the bot's message for the gateway's key (the same when it is resent)."""
    return "talaria-" + hashlib.sha256(key.encode()).hexdigest()[:24]


def inbound_id(msg: Any, sender: str) -> str:
    """The message's id as the server or the sender assigned it (the same on a redelivery),
    under `sender` (a bare JID, or room/nick in a room): the gateway de-duplicates on this
    id, and two clients may well pick the same one."""
    for candidate in (msg["stanza_id"]["id"], msg["origin_id"]["id"], msg["id"]):
        if candidate:
            return f"{sender}/{candidate}"
    digest = hashlib.sha256(f"{msg['from']}\x1f{msg['body']}".encode()).hexdigest()[:24]
    return f"{sender}/body-{digest}"


def create(name: str, settings: Mapping[str, Any]) -> XmppPlatform:
    return XmppPlatform(name, XmppSettings.parse(settings))
