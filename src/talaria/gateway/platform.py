"""What the gateway needs from a chat platform, and what it gives one.

An adapter (one module per platform: `talaria.gateway.telegram`, `.slack`, `.irc`, ...)
turns its platform's updates into `Inbound` messages and `ButtonPress`es for the gateway, and
carries the gateway's answers back with `send`, `edit` and `typing`. Everything else (who may
talk, sessions, commands, progress, splitting long answers, the delivery ledger, retries) is
the gateway's, so an adapter stays a translation of its wire format and nothing more.

Delivery contract (docs/gateway.md, "Delivery"):
- an adapter acknowledges an update to its platform (Telegram's offset, Slack's envelope ack,
  an IMAP flag) only after the sink it was given has returned: the gateway has recorded the
  update by then, and de-duplicates a redelivery by `Inbound.message_id`;
- `send` returns the platform's id of the message only once the platform has accepted it;
  a refusal for flooding raises `RateLimited` (the gateway waits and sends again), any other
  failure raises (`PlatformError` when it is final: the gateway does not retry it;
  `NotSent` when nothing left for the platform, so a later send cannot make a repeat);
- `send` receives a `key` unique to that piece of an answer: a platform that de-duplicates
  sends by a client key (Matrix's transaction id) passes it on, so a resend after a crash is
  still one message; on the others the gateway marks a resend as possibly repeated.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class ChatRef:
    """Where a message lives: one platform, one chat or room, optionally one thread in it.
    Each distinct ChatRef is one talaria session; an answer only ever goes to the ChatRef of
    the message it answers."""

    platform: str
    """The configured name of the platform (the key under `gateway.platforms`)."""
    chat_id: str
    thread_id: str | None = None

    @property
    def key(self) -> str:
        """A stable text form, used as the ledger's and the session map's key."""
        thread = self.thread_id or ""
        return f"{self.platform}\x1f{self.chat_id}\x1f{thread}"


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file sent with a message: its bytes, or a way to download them (`fetch`), called
    only once the sender may talk: a stranger's file is never downloaded."""

    name: str
    mime_type: str
    """As the platform claims it (an image is recognised by its bytes, not by this)."""
    data: bytes | None = None
    url: str | None = None
    """The platform's reference to download the file again (a URL, an `mxc://` URI, a
    Telegram file id), which the ledger keeps (`FetchesFiles`)."""
    size: int | None = None
    """The size the platform announced, checked against the limit before downloading."""
    fetch: Callable[[], Awaitable[bytes]] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Inbound:
    """A message a user sent where the gateway can read it."""

    chat: ChatRef
    message_id: str
    """The platform's id for this message or update: the same on a redelivery."""
    sender_id: str
    """Stable id of the sender (what allowlists name): a user id, not a display name."""
    text: str
    sender_name: str = ""
    is_direct: bool = False
    """A one-to-one conversation with the bot (pairing applies; no need to be addressed)."""
    mentioned: bool = False
    """The bot was mentioned by name in the text (adapter-detected, platform rules)."""
    reply_to_bot: bool = False
    """The message replies to one of the bot's messages."""
    attachments: tuple[Attachment, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The platform's own data for the update, for the adapter's use only."""


@dataclass(frozen=True, slots=True)
class Button:
    """One choice under a question; `value` comes back verbatim in `ButtonPress.value`."""

    label: str
    value: str


@dataclass(frozen=True, slots=True)
class ButtonPress:
    """A user pressed one of the bot's buttons."""

    chat: ChatRef
    sender_id: str
    value: str
    message_id: str = ""
    """The id of the message the button was under."""
    press_id: str = ""
    """The platform's id for the press (a Telegram callback query id), if it has one."""


Update = Inbound | ButtonPress
Sink = Callable[[Update], Awaitable[None]]
Sleep = Callable[[float], Awaitable[None]]
"""How an adapter or the outbox waits (tests pass one that records the waits)."""
"""What an adapter hands its updates to; it acknowledges the update once this returns."""


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the platform can show; the gateway adapts its behaviour to it."""

    can_edit: bool = False
    """Sent messages can be edited (progress and streaming edit one message)."""
    max_len: int = 4000
    """The longest text one message may carry, in characters (the gateway splits longer
    answers, never inside a code block when it can help it)."""
    buttons: bool = False
    """Messages can carry buttons (`send(..., buttons=...)`) that come back as presses."""
    typing: bool = False
    """The platform shows a typing indicator (`typing` is called every few seconds while a
    turn runs, and once with `active=False` when it ends)."""
    threads: bool = False
    """Messages can go into a thread (`ChatRef.thread_id`)."""
    dedupes_sends: bool = False
    """`send` with the same `key` twice makes one message (Matrix transaction ids)."""


class RateLimited(Exception):
    """The platform refused a request for flooding; try again after `retry_after` seconds."""

    def __init__(self, retry_after: float, message: str = "") -> None:
        super().__init__(message or f"rate limited: retry after {retry_after:g} s")
        self.retry_after = retry_after


class NotSent(ConnectionError):
    """Nothing of the message left for the platform (not connected): sending it later
    cannot show it twice."""


class PlatformError(Exception):
    """A final refusal (no such chat, the bot was removed, the text is malformed): sending the
    same request again cannot succeed."""


@runtime_checkable
class Platform(Protocol):
    """One connected chat platform.

    `start` connects and delivers updates to `sink` until `stop`; it returns once the
    adapter is receiving (the receiving itself runs in tasks the adapter owns). The other
    methods may be called concurrently from the gateway's event loop."""

    name: str
    capabilities: Capabilities

    async def start(self, sink: Sink) -> None: ...

    async def stop(self) -> None: ...

    async def send(
        self,
        chat: ChatRef,
        text: str,
        *,
        key: str,
        buttons: Sequence[Button] = (),
        reply_to: str | None = None,
    ) -> str:
        """Post `text` (with `buttons` where supported) and return the platform's message
        id. `reply_to` is the id of the inbound message being answered (threads by it where
        the platform threads that way, as email does by In-Reply-To)."""
        ...

    async def edit(
        self, chat: ChatRef, message_id: str, text: str, *, buttons: Sequence[Button] = ()
    ) -> None:
        """Replace the text (and buttons) of one of the bot's messages (`can_edit` only)."""
        ...

    async def typing(self, chat: ChatRef, *, active: bool = True) -> None:
        """Show that the bot is working, or (`active=False`, once the turn ended) that it
        no longer is (`typing` only; a no-op elsewhere)."""
        ...


@runtime_checkable
class SendsFiles(Protocol):
    """A platform that can send a file (optional: without it, the gateway says in the chat
    which file it could not send)."""

    async def send_file(
        self, chat: ChatRef, path: Path, *, key: str, reply_to: str | None = None
    ) -> str:
        """Post the file at `path` (an image when it is one, else a document); the message
        id. `key` is unique to this file of this answer, as `Platform.send`'s is."""
        ...


@runtime_checkable
class FetchesFiles(Protocol):
    """A platform that can download a file from its `Attachment.url` alone: after a restart
    the gateway has only what the ledger kept of a message it took in but never answered."""

    async def fetch_file(self, url: str) -> bytes: ...


async def end_tasks(*tasks: asyncio.Task[None] | None) -> None:
    """Cancel an adapter's own tasks (receiving, reconnecting) and wait until they ended."""
    for task in tasks:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


PlatformFactory = Callable[[str, Mapping[str, Any]], Platform]
"""`create(name, settings)`: each adapter module's entry point. `settings` is the
`gateway.platforms.<name>` mapping with its secrets already resolved."""

ADAPTERS: dict[str, str] = {
    "telegram": "talaria.gateway.telegram",
    "slack": "talaria.gateway.slack",
    "irc": "talaria.gateway.irc",
    "matrix": "talaria.gateway.matrix",
    "email": "talaria.gateway.email",
    "xmpp": "talaria.gateway.xmpp",
    "fake": "talaria.gateway.fake",
}
"""Platform type -> the module whose `create` builds it; imported only when configured.
A platform's `type` defaults to its name under `gateway.platforms`."""
