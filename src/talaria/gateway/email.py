"""Email: IMAP in (aioimaplib, with IDLE), SMTP out (the standard library), `talaria[email]`.

The bot has a mailbox of its own (docs/gateway-email.md). Each conversation is a thread: the
chat is the correspondent's address and the thread its first message's Message-ID, so a new
subject starts a new session and a reply continues one. A message is acknowledged by flagging
it with a keyword of the gateway's (not `\\Seen`, which belongs to whoever reads the mailbox),
and only after the gateway has recorded it; an unflagged message is delivered again after a
restart and de-duplicated by its Message-ID. Answers carry `In-Reply-To` and `References`, a
Message-ID derived from the gateway's key (a resend is recognisably the same message) and
`Auto-Submitted: auto-replied`; mail that is itself automatic is never answered (RFC 3834),
so two bots cannot write to each other forever. A file the agent sends back is a mail of its
own in the thread, with the file attached.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import imaplib
import logging
import re
import smtplib
import ssl
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage, Message
from email.utils import formataddr, formatdate, parseaddr, parsedate_to_datetime
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
    PlatformError,
    RateLimited,
    Sink,
)

log = logging.getLogger(__name__)

REMEMBERED = 2000
"""How many threads' subjects and references the adapter keeps in memory."""
QUOTE_INTRO = re.compile(r"^On .+ wrote:\s*$")


@dataclass(frozen=True, slots=True)
class EmailSettings:
    """`gateway.platforms.<name>` for `type: email`."""

    address: str
    password: str
    imap_host: str
    username: str = ""
    """The login for IMAP and SMTP (default: `address`)."""
    imap_port: int = 993
    imap_tls: bool = True
    """IMAP over TLS (port 993); false only for a server on this machine."""
    smtp_host: str = ""
    """Default: `imap_host`."""
    smtp_port: int = 465
    smtp_security: str = "tls"
    """`tls` (port 465), `starttls` (port 587) or `none` (a server on this machine)."""
    folder: str = "INBOX"
    display_name: str = "talaria"
    handled_keyword: str = "$TalariaHandled"
    max_age_s: float = 172800.0
    """Mail older than this (by its Date) when first seen is flagged and not answered."""
    idle_s: float = 600.0
    """How long one IMAP IDLE lasts before it is renewed."""
    retry_after_s: float = 60.0
    """How long to wait after a temporary SMTP refusal (4xx)."""

    @classmethod
    def parse(cls, settings: Mapping[str, Any]) -> EmailSettings:
        security = {"smtp_security": ("tls", "starttls", "none")}
        return read_settings(cls, settings, "email", ("address", "password", "imap_host"), security)

    @property
    def login(self) -> str:
        return self.username or self.address


@dataclass(frozen=True, slots=True)
class Thread:
    """What an answer needs to join a conversation."""

    subject: str
    references: tuple[str, ...]


class EmailPlatform:
    capabilities = Capabilities(can_edit=False, max_len=100_000, threads=True)

    def __init__(self, name: str, settings: EmailSettings) -> None:
        self.name = name
        self.settings = settings
        self.domain = settings.address.rpartition("@")[2] or "localhost"
        self._sink: Sink | None = None
        self._task: asyncio.Task[None] | None = None
        self._threads: OrderedDict[str, Thread] = OrderedDict()
        """Message-ID -> its thread, for the answers to it."""

    # ---- receiving -------------------------------------------------------------------------

    async def start(self, sink: Sink) -> None:
        self._sink = sink
        imap = await self._connect()  # a wrong password fails the start, not a background task
        self._task = asyncio.create_task(self._receive(imap), name=f"email-{self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._sink = None

    async def _connect(self) -> Any:
        from aioimaplib import IMAP4, IMAP4_SSL

        s = self.settings
        imap = (
            IMAP4_SSL(s.imap_host, s.imap_port) if s.imap_tls else IMAP4(s.imap_host, s.imap_port)
        )
        await imap.wait_hello_from_server()
        if (await imap.login(s.login, s.password)).result != "OK":
            raise PlatformError(f"email: IMAP login refused for {s.login}")
        if (await imap.select(s.folder)).result != "OK":
            raise PlatformError(f"email: no folder {s.folder}")
        return imap

    async def _receive(self, imap: Any) -> None:
        backoff = 1.0
        while True:
            try:
                imap = imap or await self._connect()
                await self._drain(imap)
                await self._idle(imap)
                backoff = 1.0
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(imap.logout(), 5)
                raise
            except Exception as error:  # the server restarting, a dropped connection
                log.warning("email %s: %s; reconnecting in %.0f s", self.name, error, backoff)
                imap = None
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 60.0)

    async def _idle(self, imap: Any) -> None:
        """Until the server says the folder changed (or the IDLE period ends)."""
        idle = await imap.idle_start(timeout=self.settings.idle_s)
        try:
            await imap.wait_server_push(timeout=self.settings.idle_s + 30)
        finally:
            imap.idle_done()
            await asyncio.wait_for(idle, 30)

    async def _drain(self, imap: Any) -> None:
        """Deliver every message not yet flagged as handled, oldest first."""
        found = await imap.uid_search(f"UNKEYWORD {self.settings.handled_keyword}")
        uids = found.lines[0].split() if found.result == "OK" and found.lines else []
        for uid in sorted(uids, key=int):
            fetched = await imap.uid("fetch", uid.decode(), "(BODY.PEEK[])")
            raw = next((bytes(line) for line in fetched.lines if isinstance(line, bytearray)), None)
            if raw is not None:
                await self._deliver(message_from_bytes(raw, policy=policy.default))
            keyword = f"({self.settings.handled_keyword})"
            stored = await imap.uid("store", uid.decode(), "+FLAGS.SILENT", keyword)
            if stored.result != "OK":
                raise ConnectionError(f"IMAP refused to flag a handled message: {stored.lines}")

    async def _deliver(self, mail: Message) -> None:
        inbound = self._inbound(mail)
        if inbound is not None and self._sink is not None:
            await self._sink(inbound)

    def _inbound(self, mail: Message) -> Inbound | None:
        sender_name, sender = parseaddr(str(mail.get("From", "")))
        sender = sender.lower()
        if not sender or sender == self.settings.address.lower() or _automatic(mail):
            return None
        if _age(mail) > self.settings.max_age_s:
            return None
        message_id = str(mail.get("Message-ID", "")).strip() or _fallback_id(mail)
        references = _ids(str(mail.get("References", "")))
        in_reply_to = _ids(str(mail.get("In-Reply-To", "")))
        root = (references or in_reply_to or (message_id,))[0]
        _remember(
            self._threads,
            message_id,
            Thread(str(mail.get("Subject", "")), (*references, message_id)),
        )
        text, attachments = _content(mail)
        own = f"@{self.domain}>"
        return Inbound(
            chat=ChatRef(self.name, sender, root),
            message_id=message_id,
            sender_id=sender,
            text=text,
            sender_name=sender_name,
            is_direct=True,
            reply_to_bot=any(ref.endswith(own) for ref in in_reply_to),
            attachments=attachments,
        )

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
        mail = await self._reply(chat, key, reply_to)
        mail.set_content(text)
        await asyncio.to_thread(self._submit, mail)
        return str(mail["Message-ID"])

    async def send_file(
        self, chat: ChatRef, path: Path, *, key: str, reply_to: str | None = None
    ) -> str:
        """A mail in the conversation's thread with the file attached."""
        data = await asyncio.to_thread(path.read_bytes)
        mime = files.mime_type(path.name, data)
        maintype, _, subtype = mime.partition("/")
        mail = await self._reply(chat, key, reply_to)
        mail.set_content(f"Attached: {path.name}")
        mail.add_attachment(data, maintype=maintype, subtype=subtype, filename=path.name)
        await asyncio.to_thread(self._submit, mail)
        return str(mail["Message-ID"])

    async def _reply(self, chat: ChatRef, key: str, reply_to: str | None) -> EmailMessage:
        """The headers of a mail of the bot's in the chat's thread, answering `reply_to`."""
        answered = reply_to or chat.thread_id
        thread = await self._thread(answered) if answered else Thread("", ())
        mail = EmailMessage()
        mail["From"] = formataddr((self.settings.display_name, self.settings.address))
        mail["To"] = chat.chat_id
        subject = thread.subject or "talaria"
        mail["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}"
        message_id = f"<{hashlib.sha256(key.encode()).hexdigest()[:32]}@{self.domain}>"
        mail["Message-ID"] = message_id
        mail["Date"] = formatdate(localtime=True)
        mail["Auto-Submitted"] = "auto-replied"
        if answered:
            mail["In-Reply-To"] = answered
            mail["References"] = " ".join(thread.references or (answered,))
        return mail

    async def edit(
        self, chat: ChatRef, message_id: str, text: str, *, buttons: Sequence[Button] = ()
    ) -> None:
        raise PlatformError("email cannot edit a sent message")

    async def typing(self, chat: ChatRef, *, active: bool = True) -> None:
        return None

    def _submit(self, mail: EmailMessage) -> None:
        s = self.settings
        host = s.smtp_host or s.imap_host
        try:
            if s.smtp_security == "tls":
                smtp: smtplib.SMTP = smtplib.SMTP_SSL(host, s.smtp_port, timeout=60)
            else:
                smtp = smtplib.SMTP(host, s.smtp_port, timeout=60)
            with smtp:
                if s.smtp_security == "starttls":
                    smtp.starttls(context=ssl.create_default_context())
                if smtp.has_extn("auth"):
                    smtp.login(s.login, s.password)
                smtp.send_message(mail)
        except smtplib.SMTPRecipientsRefused as refused:
            codes = [code for code, _ in refused.recipients.values()]
            _raise_for(min(codes), str(refused.recipients), s.retry_after_s)
        except smtplib.SMTPResponseException as error:
            _raise_for(error.smtp_code, str(error.smtp_error), s.retry_after_s)

    async def _thread(self, message_id: str) -> Thread:
        """The thread of `message_id`: remembered, or read back from the mailbox (after a
        restart, to resend an answer the gateway had not seen confirmed)."""
        known = self._threads.get(message_id)
        if known is not None:
            return known
        found = await asyncio.to_thread(self._lookup, message_id)
        _remember(self._threads, message_id, found)
        return found

    def _lookup(self, message_id: str) -> Thread:
        s = self.settings
        imap_class = imaplib.IMAP4_SSL if s.imap_tls else imaplib.IMAP4
        with imap_class(s.imap_host, s.imap_port, timeout=30) as imap:
            imap.login(s.login, s.password)
            imap.select(s.folder, readonly=True)
            _, data = imap.uid("search", None, "HEADER", "Message-ID", message_id)  # type: ignore[arg-type]
            uids = data[0].split() if data and data[0] else []
            if not uids:
                return Thread("", (message_id,))
            _, parts = imap.uid("fetch", uids[-1], "(BODY.PEEK[HEADER])")
            first = parts[0]
            header = message_from_bytes(first[1] if isinstance(first, tuple) else b"")
        references = _ids(str(header.get("References", "")))
        return Thread(str(header.get("Subject", "")), (*references, message_id))


def _raise_for(code: int, detail: str, retry_after: float) -> None:
    if 400 <= code < 500:
        raise RateLimited(retry_after, f"SMTP {code}: {detail}")
    raise PlatformError(f"SMTP {code}: {detail}")


def _automatic(mail: Message) -> bool:
    """Bounces, auto-replies and list traffic: answering them could loop (RFC 3834)."""
    auto = str(mail.get("Auto-Submitted", "no")).strip().lower()
    precedence = str(mail.get("Precedence", "")).strip().lower()
    return auto != "no" or precedence in ("bulk", "list", "junk") or "List-Id" in mail


def _age(mail: Message) -> float:
    try:
        return time.time() - parsedate_to_datetime(str(mail["Date"])).timestamp()
    except (TypeError, ValueError):
        return 0.0


def _ids(header: str) -> tuple[str, ...]:
    return tuple(re.findall(r"<[^<>\s]+>", header))


def _fallback_id(mail: Message) -> str:
    """An id for a message without a Message-ID: the same for the same message."""
    parts = (str(mail.get(h, "")) for h in ("From", "Date", "Subject"))
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]
    return f"<{digest}@no-message-id>"


def _content(mail: Message) -> tuple[str, tuple[Attachment, ...]]:
    """The new text of the message (quotes and signature removed) and its attachments."""
    assert isinstance(mail, EmailMessage)
    body = mail.get_body(preferencelist=("plain", "html"))
    text = body.get_content() if body is not None else ""
    if body is not None and body.get_content_type() == "text/html":
        text = re.sub(r"<[^>]+>", "", text)
    attachments = tuple(
        Attachment(
            part.get_filename() or "attachment",
            part.get_content_type(),
            data=bytes(part.get_payload(decode=True) or b""),
        )
        for part in mail.iter_attachments()
    )
    return _without_quote(text), attachments


def _without_quote(text: str) -> str:
    kept: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if line.rstrip() == "--":
            break  # the signature
        if line.startswith(">"):
            continue
        kept.append(line)
    while kept and (not kept[-1].strip() or QUOTE_INTRO.match(kept[-1])):
        kept.pop()
    return "\n".join(kept).strip()


def _remember(cache: OrderedDict[str, Thread], key: str, value: Thread) -> None:
    cache[key] = value
    while len(cache) > REMEMBERED:
        cache.popitem(last=False)


def create(name: str, settings: Mapping[str, Any]) -> EmailPlatform:
    return EmailPlatform(name, EmailSettings.parse(settings))
