"""The gateway on a real chat server: a bot account for it and people with real clients.

`Live` is one platform (Matrix on Synapse, email on Dovecot and SMTP, XMPP on Prosody); a test
asks it for a fresh bot (`bot()`) and for people talking to that bot (`person(name, bot)`),
then reads what each person's client shows of the bot's messages (edits applied)."""

from __future__ import annotations

import asyncio
import io
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from email.message import EmailMessage
from typing import Any, Protocol, TypeVar, runtime_checkable

from mail_server import MailServer
from matrix_server import MatrixUser, Synapse
from xmpp_server import DOMAIN, XmppServer, XmppUser

from talaria.gateway.platform import Platform

WAIT_S = 90.0
T = TypeVar("T")


class Person(Protocol):
    user_id: str

    async def say(self, text: str) -> None: ...

    async def shown(self) -> list[str]:
        """The bot's messages in this conversation as the person's client shows them now."""
        ...

    async def files(self) -> list[tuple[str, bytes]]:
        """The files the bot sent in this conversation (name, bytes), downloaded as the
        person's client does."""
        ...


@runtime_checkable
class SendsFiles(Person, Protocol):
    async def send_file(self, name: str, data: bytes) -> None:
        """Send the bot a file, as the platform's clients do."""
        ...

    async def choose(self, question: str, index: int, command: str) -> None:
        """Answer the bot's question (the message containing `question`): the choice at
        `index` where the platform has choices to click, else the `command` as a reply."""
        ...

    async def repeat(self) -> None:
        """Have the server deliver the person's last message to the bot again, as it does
        after a lost acknowledgement (call it while the bot's gateway is stopped)."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class ShowsTyping(Person, Protocol):
    async def typing(self) -> bool:
        """The person's client shows the bot typing now."""
        ...


async def until_typing(person: ShowsTyping) -> None:
    """Until the person's client shows the bot typing."""
    await _until(person.typing, bool, person.user_id)


async def until_shown(person: Person, check: Callable[[list[str]], bool]) -> list[str]:
    """What the person sees once `check` holds for it."""
    return await _until(person.shown, check, person.user_id)


async def until_files(person: Person, count: int) -> list[tuple[str, bytes]]:
    """The files the bot sent the person, once there are `count` of them."""
    return await _until(person.files, lambda sent: len(sent) >= count, person.user_id)


async def _until(read: Callable[[], Awaitable[T]], check: Callable[[T], bool], who: str) -> T:
    deadline = time.monotonic() + WAIT_S
    while True:
        seen = await read()
        if check(seen):
            return seen
        assert time.monotonic() < deadline, f"{who} sees only {seen}"
        await asyncio.sleep(0.1)


def unique(name: str) -> str:
    return f"{name}{uuid.uuid4().hex[:8]}"


class Live(Protocol):
    kind: str
    send_port: int
    """The server's port the bot's answers go out through (where a test puts a proxy)."""

    def bot_settings(self) -> dict[str, Any]:
        """`gateway.platforms.<kind>` for a fresh bot account."""
        ...

    def through(self, settings: dict[str, Any], port: int) -> dict[str, Any]:
        """`settings` with the answers going out through `port` on loopback instead."""
        ...

    def bot(self) -> Platform: ...

    def same_bot(self, bot: Platform) -> Platform:
        """A new adapter for the account of `bot` (the gateway restarted)."""
        ...

    async def person(self, name: str, bot: Platform) -> Person: ...


# ---- Matrix --------------------------------------------------------------------------------


class MatrixPerson:
    def __init__(self, user: MatrixUser, room: str, bot_id: str) -> None:
        self.user, self.room, self.bot_id = user, room, bot_id
        self.user_id = user.user_id

    async def say(self, text: str) -> None:
        await self.user.say(self.room, text)

    async def send_file(self, name: str, data: bytes) -> None:
        """The file uploaded to the media repository and posted as an `m.file`."""
        from nio import UploadResponse

        response, _ = await self.user.client.upload(
            io.BytesIO(data), content_type="text/plain", filename=name, filesize=len(data)
        )
        assert isinstance(response, UploadResponse), response
        content = {"url": response.content_uri, "info": {"size": len(data)}}
        await self.user.say(self.room, name, msgtype="m.file", **content)

    async def shown(self) -> list[str]:
        await self.user.sync()
        return [m.body for m in self.user.messages(self.room, self.bot_id)]

    async def typing(self) -> bool:
        await self.user.sync()
        return self.bot_id in self.user.typing.get(self.room, [])

    async def files(self) -> list[tuple[str, bytes]]:
        from nio import DownloadResponse

        await self.user.sync()
        sent = []
        for message in self.user.messages(self.room, self.bot_id):
            if message.content.get("msgtype") in ("m.file", "m.image"):
                response = await self.user.client.download(mxc=message.content["url"])
                assert isinstance(response, DownloadResponse), response
                sent.append((message.body, response.body))
        return sent

    async def choose(self, question: str, index: int, command: str) -> None:
        from talaria.gateway.matrix import CHOICES

        asked = [m for m in self.user.messages(self.room, self.bot_id) if question in m.body]
        await self.user.react(self.room, asked[-1].event_id, CHOICES[index])

    async def repeat(self) -> None:
        return None  # a restarted adapter syncs the last minutes again (catch_up_s)

    async def close(self) -> None:
        await self.user.__aexit__()


class LiveMatrix:
    kind = "matrix"

    def __init__(self, server: Synapse) -> None:
        self.server = server
        self.send_port = server.port

    def bot_settings(self) -> dict[str, Any]:
        name = unique("bot")
        return {
            "homeserver": self.server.url,
            "user_id": self.server.user_id(name),
            "access_token": self.server.register(name),
            "sync_timeout_ms": 1000,
        }

    def through(self, settings: dict[str, Any], port: int) -> dict[str, Any]:
        return {**settings, "homeserver": f"http://127.0.0.1:{port}"}

    def bot(self) -> Platform:
        from talaria.gateway.matrix import create

        return create("matrix", self.bot_settings())

    def same_bot(self, bot: Platform) -> Platform:
        from talaria.gateway.matrix import MatrixPlatform, create

        assert isinstance(bot, MatrixPlatform)
        s = bot.settings
        settings = {
            "homeserver": s.homeserver,
            "user_id": s.user_id,
            "access_token": s.access_token,
            "sync_timeout_ms": s.sync_timeout_ms,
        }
        return create("matrix", settings)

    async def person(self, name: str, bot: Platform) -> Person:
        from talaria.gateway.matrix import MatrixPlatform

        assert isinstance(bot, MatrixPlatform)
        user = await MatrixUser(self.server, unique(name)).__aenter__()
        room = await user.create_room(invite=[bot.settings.user_id], direct=True)
        return MatrixPerson(user, room, bot.settings.user_id)


# ---- email ---------------------------------------------------------------------------------


class MailPerson:
    """Writes to the bot in one thread (each mail replies to the previous one)."""

    async def send_file(self, name: str, data: bytes) -> None:
        await self.say("", attached=(name, data))

    def __init__(self, server: MailServer, address: str, bot_address: str) -> None:
        self.server, self.user_id, self.bot_address = server, address, bot_address
        self.subject = f"Talk {uuid.uuid4().hex[:6]}"
        self.sent: list[str] = []

    async def say(self, text: str, attached: tuple[str, bytes] | None = None) -> None:
        mail = EmailMessage()
        mail["From"], mail["To"] = self.user_id, self.bot_address
        mail["Subject"] = self.subject if not self.sent else f"Re: {self.subject}"
        mail["Message-ID"] = f"<{uuid.uuid4().hex}@{DOMAIN}>"
        if self.sent:
            mail["In-Reply-To"], mail["References"] = self.sent[-1], " ".join(self.sent)
        mail.set_content(text)
        if attached:
            name, data = attached
            mail.add_attachment(data, maintype="text", subtype="plain", filename=name)
        self.sent.append(mail["Message-ID"])
        await asyncio.to_thread(self.server.send, mail)

    async def shown(self) -> list[str]:
        return [_text(m) for m in await self._mails()]

    async def replies(self) -> list[tuple[str, str]]:
        """The bot's mails as (the Message-ID of the mail each replies to, its text)."""
        return [(str(m["In-Reply-To"]), _text(m)) for m in await self._mails()]

    async def files(self) -> list[tuple[str, bytes]]:
        return [
            (str(part.get_filename()), bytes(part.get_payload(decode=True)))
            for mail in await self._mails()
            for part in mail.iter_attachments()
        ]

    async def _mails(self) -> list[EmailMessage]:
        """The bot's mails in this person's thread (each replies within it)."""
        inbox = await asyncio.to_thread(self.server.inbox, self.user_id)
        return [m for m in inbox if self.bot_address in m["From"]]

    async def choose(self, question: str, index: int, command: str) -> None:
        await self.say(command)

    async def repeat(self) -> None:
        from talaria.gateway.email import EmailSettings

        keyword = EmailSettings.__dataclass_fields__["handled_keyword"].default
        await asyncio.to_thread(self.server.unflag, self.bot_address, str(keyword))

    async def close(self) -> None:
        return None


def _text(mail: EmailMessage) -> str:
    """A mail's text as a mail client shows it (its lines, whatever ended them on the wire)."""
    return "\n".join(str(mail.get_body(("plain",)).get_content()).strip().splitlines())


class LiveMail:
    kind = "email"

    def __init__(self, server: MailServer) -> None:
        self.server = server
        self.send_port = server.smtp_port

    def bot_settings(self) -> dict[str, Any]:
        return self._settings(self.server.add_user(unique("bot")))

    def through(self, settings: dict[str, Any], port: int) -> dict[str, Any]:
        return {**settings, "smtp_port": port}

    def _settings(self, address: str) -> dict[str, Any]:
        return {
            "address": address,
            "password": self.server.passwords[address],
            "imap_host": "127.0.0.1",
            "imap_port": self.server.imap_port,
            "imap_tls": False,
            "smtp_port": self.server.smtp_port,
            "smtp_security": "none",
        }

    def bot(self) -> Platform:
        from talaria.gateway.email import create

        return create("email", self.bot_settings())

    def same_bot(self, bot: Platform) -> Platform:
        from talaria.gateway.email import EmailPlatform, create

        assert isinstance(bot, EmailPlatform)
        return create("email", self._settings(bot.settings.address))

    async def person(self, name: str, bot: Platform) -> Person:
        from talaria.gateway.email import EmailPlatform

        assert isinstance(bot, EmailPlatform)
        return MailPerson(self.server, self.server.add_user(unique(name)), bot.settings.address)


# ---- XMPP ----------------------------------------------------------------------------------


class XmppPerson:
    def __init__(self, user: XmppUser, bot_jid: str) -> None:
        self.user, self.bot_jid = user, bot_jid
        self.user_id = user.jid
        self.last = ("", "")

    async def say(self, text: str) -> None:
        self.last = (text, self.user.say(self.bot_jid, text))

    async def send_file(self, name: str, data: bytes) -> None:
        """Uploaded to the server (XEP-0363), its link sent marked as a file (XEP-0066)."""
        client = self.user.client
        url = await client.plugin["xep_0363"].upload_file(
            name, len(data), "text/plain", input_file=io.BytesIO(data), timeout=30
        )
        message = client.make_message(mto=self.bot_jid, mbody=url, mtype="chat")
        message["oob"]["url"] = url
        message.send()

    async def shown(self) -> list[str]:
        return [m.body for m in self.user.received if m.sender.startswith(self.bot_jid)]

    async def typing(self) -> bool:
        return self.user.states[-1:] == ["composing"]

    async def files(self) -> list[tuple[str, bytes]]:
        links = [
            m.file_url for m in self.user.received if m.sender.startswith(self.bot_jid)
            if m.file_url
        ]  # fmt: skip
        return [await asyncio.to_thread(_download, link) for link in links]

    async def choose(self, question: str, index: int, command: str) -> None:
        await self.say(command)

    async def repeat(self) -> None:
        self.user.say(self.bot_jid, self.last[0], message_id=self.last[1])

    async def close(self) -> None:
        await self.user.__aexit__()


def _download(url: str) -> tuple[str, bytes]:
    """A file behind a link (its name is the link's last part), as a client fetches it."""
    with urllib.request.urlopen(url, timeout=30) as response:
        data: bytes = response.read()
    return urllib.parse.unquote(url.rsplit("/", 1)[-1]), data


class LiveXmpp:
    """Prosody's accounts are made at its start: one bot account, a fresh resource each time."""

    kind = "xmpp"

    def __init__(self, server: XmppServer) -> None:
        self.server = server
        self.send_port = server.port

    def bot_settings(self) -> dict[str, Any]:
        jid = f"bot@{DOMAIN}"
        return {
            "jid": jid,
            "password": self.server.passwords[jid],
            "host": "127.0.0.1",
            "port": self.server.port,
            "tls": "none",
            "resource": unique("gw"),
        }

    def through(self, settings: dict[str, Any], port: int) -> dict[str, Any]:
        return {**settings, "port": port}

    def bot(self) -> Platform:
        from talaria.gateway.xmpp import create

        return create("xmpp", self.bot_settings())

    def same_bot(self, bot: Platform) -> Platform:
        return self.bot()

    async def person(self, name: str, bot: Platform) -> Person:
        user = await XmppUser(self.server, name).__aenter__()
        return XmppPerson(user, f"bot@{DOMAIN}")
