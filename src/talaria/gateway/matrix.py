"""Matrix, through matrix-nio (`talaria[matrix]`): rooms and direct chats on any homeserver.

A bot is an ordinary Matrix account (docs/gateway-matrix.md). The adapter long-polls `/sync`,
turns room messages into `Inbound`s (threads by `m.thread`), and answers with `m.room.message`
events sent under a transaction id derived from the gateway's key, so the homeserver itself
de-duplicates a resend after a crash. Edits are `m.replace` events; a file sent back is
uploaded to the homeserver's media repository and posted as `m.image` or `m.file`. Matrix has
no buttons: a question lists numbered choices and the bot reacts with each number, so a user
answers with one click on a reaction (or by replying with the number or the choice's label).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import io
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from talaria.gateway import files
from talaria.gateway.adapter_settings import read_settings
from talaria.gateway.platform import (
    Attachment,
    Button,
    ButtonPress,
    Capabilities,
    ChatRef,
    Inbound,
    PlatformError,
    RateLimited,
    Sink,
    Update,
    end_tasks,
)

log = logging.getLogger(__name__)

CHOICES = ("1️⃣", "2️⃣", "3️⃣", "4️⃣", "5️⃣", "6️⃣", "7️⃣", "8️⃣", "9️⃣")
"""The reactions that stand for a question's choices, in order."""
FINAL_ERRORS = frozenset({"M_FORBIDDEN", "M_NOT_FOUND", "M_UNKNOWN_TOKEN", "M_BAD_JSON",
                          "M_TOO_LARGE", "M_INVALID_PARAM", "M_NOT_JSON"})  # fmt: skip
"""Refusals that sending again cannot fix."""
REMEMBERED = 2000
"""How many of its own messages (and open questions) the adapter remembers per process."""


@dataclass(frozen=True, slots=True)
class MatrixSettings:
    """`gateway.platforms.<name>` for `type: matrix`."""

    homeserver: str
    user_id: str
    access_token: str = ""
    password: str = ""
    device_id: str = "TALARIA_GATEWAY"
    join_on_invite: bool = True
    """Join rooms the bot is invited to (who may talk in them is still the allowlist's)."""
    catch_up_s: float = 300.0
    """At start, messages sent up to this long before are answered (not older ones)."""
    sync_timeout_ms: int = 30000

    @classmethod
    def parse(cls, settings: Mapping[str, Any]) -> MatrixSettings:
        parsed = read_settings(cls, settings, "matrix", ("homeserver", "user_id"))
        if not parsed.access_token and not parsed.password:
            raise ValueError("matrix: `access_token` (or `password`) is required")
        return parsed


class MatrixPlatform:
    capabilities = Capabilities(
        can_edit=True, max_len=16000, buttons=True, typing=True, threads=True, dedupes_sends=True
    )

    def __init__(self, name: str, settings: MatrixSettings) -> None:
        self.name = name
        self.settings = settings
        self._client: Any = None
        self._sink: Sink | None = None
        self._task: asyncio.Task[None] | None = None
        self._sent: OrderedDict[str, None] = OrderedDict()
        self._questions: OrderedDict[str, tuple[Button, ...]] = OrderedDict()
        """Open questions: the message's event id -> its choices, in reaction order."""
        self._question_thread: OrderedDict[str, str | None] = OrderedDict()

    # ---- connecting and receiving ---------------------------------------------------------

    async def start(self, sink: Sink) -> None:
        from nio import AsyncClient, AsyncClientConfig

        config = AsyncClientConfig(max_limit_exceeded=0, max_timeouts=0, request_timeout=60)
        client = AsyncClient(
            self.settings.homeserver,
            self.settings.user_id,
            device_id=self.settings.device_id,
            config=config,
        )
        if self.settings.access_token:
            client.access_token = self.settings.access_token
            client.user_id = self.settings.user_id
        else:
            _check(await client.login(self.settings.password, device_name="talaria gateway"))
        self._client, self._sink = client, sink
        first = _check(await client.sync(timeout=0, full_state=True))
        await self._handle(first, not_before=time.time() - self.settings.catch_up_s)
        self._task = asyncio.create_task(self._sync_forever(), name=f"matrix-sync-{self.name}")

    async def stop(self) -> None:
        await end_tasks(self._task)
        if self._client is not None:
            await self._client.close()
        self._sink = None

    async def _sync_forever(self) -> None:
        backoff = 1.0
        while True:
            try:
                response = _check(await self._client.sync(timeout=self.settings.sync_timeout_ms))
                await self._handle(response, not_before=0.0)
                backoff = 1.0
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the homeserver restarting, a network blip
                log.warning(
                    "matrix %s: sync failed (%s); again in %.0f s", self.name, error, backoff
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 60.0)

    async def _handle(self, response: Any, not_before: float) -> None:
        """Hand the sync's updates to the sink, in order; invites are joined."""
        if self.settings.join_on_invite:
            for room_id in response.rooms.invite:
                _check(await self._client.join(room_id))
        for room_id, info in response.rooms.join.items():
            for event in info.timeline.events:
                if event.sender == self.settings.user_id:
                    continue
                if event.server_timestamp / 1000 < not_before:
                    continue
                update = await self._update(room_id, event)
                if update is not None and self._sink is not None:
                    await self._sink(update)

    async def _update(self, room_id: str, event: Any) -> Update | None:
        from nio import ReactionEvent, RoomMessageFile, RoomMessageImage, RoomMessageText

        if isinstance(event, ReactionEvent):
            return self._reaction(room_id, event)
        if not isinstance(event, RoomMessageText | RoomMessageImage | RoomMessageFile):
            return None
        content = event.source.get("content", {})
        relates = content.get("m.relates_to") or {}
        if relates.get("rel_type") == "m.replace":
            return None  # a user's edit of an earlier message: that message was answered
        thread = relates.get("event_id") if relates.get("rel_type") == "m.thread" else None
        chat = ChatRef(self.name, room_id, thread)
        replied = (relates.get("m.in_reply_to") or {}).get("event_id")
        attachments: tuple[Attachment, ...] = ()
        text = ""
        if isinstance(event, RoomMessageText):
            text = _without_reply_fallback(event.body)
            press = self._reply_press(chat, event, replied, text)
            if press is not None:
                return press
        else:
            attachments = self._attachment(event)
        room = self._client.rooms.get(room_id)
        return Inbound(
            chat=chat,
            message_id=event.event_id,
            sender_id=event.sender,
            text=text,
            sender_name=room.user_name(event.sender) if room else event.sender,
            is_direct=room is not None and room.member_count <= 2,
            mentioned=self._mentions_bot(content),
            reply_to_bot=await self._is_mine(room_id, replied),
            attachments=attachments,
            raw=event.source,
        )

    def _reaction(self, room_id: str, event: Any) -> ButtonPress | None:
        buttons = self._questions.get(event.reacts_to)
        if buttons is None or event.key not in CHOICES[: len(buttons)]:
            return None
        relates = self._question_thread.get(event.reacts_to)
        return ButtonPress(
            ChatRef(self.name, room_id, relates),
            event.sender,
            buttons[CHOICES.index(event.key)].value,
            message_id=event.reacts_to,
            press_id=event.event_id,
        )

    def _reply_press(
        self, chat: ChatRef, event: Any, replied: str | None, text: str
    ) -> ButtonPress | None:
        """A reply to an open question with a choice's number or label is a press."""
        buttons = self._questions.get(replied or "")
        if not buttons:
            return None
        answer = text.strip().casefold()
        for index, button in enumerate(buttons):
            if answer in (str(index + 1), CHOICES[index], button.label.casefold()):
                return ButtonPress(chat, event.sender, button.value, replied or "", event.event_id)
        return None

    def _mentions_bot(self, content: Mapping[str, Any]) -> bool:
        me = self.settings.user_id
        mentions = content.get("m.mentions") or {}
        if me in (mentions.get("user_ids") or ()):
            return True
        texts = (str(content.get("body", "")), str(content.get("formatted_body", "")))
        localpart = me.split(":", 1)[0]
        return any(me in text or f"{localpart}:" in text for text in texts)

    async def _is_mine(self, room_id: str, event_id: str | None) -> bool:
        if not event_id:
            return False
        if event_id in self._sent:
            return True
        from nio import RoomGetEventResponse

        response = await self._client.room_get_event(room_id, event_id)
        return (
            isinstance(response, RoomGetEventResponse)
            and response.event.sender == self.settings.user_id
        )

    def _attachment(self, event: Any) -> tuple[Attachment, ...]:
        """The event's file, downloaded only when the gateway fetches it (not a stranger's)."""
        info = event.source.get("content", {}).get("info") or {}
        mime = str(info.get("mimetype") or "application/octet-stream")
        size = int(info.get("size") or 0) or None
        fetch = functools.partial(self.fetch_file, event.url)
        return (Attachment(event.body, mime, url=event.url, size=size, fetch=fetch),)

    async def fetch_file(self, url: str) -> bytes:
        """The bytes behind an `mxc://` URI, from the homeserver's media repository."""
        response = _check(await self._client.download(mxc=url))
        return bytes(response.body)

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
        content = {"msgtype": "m.text", "body": _with_choices(text, buttons)}
        event_id = await self._post(chat, content, key, reply_to)
        if buttons:
            await self._offer(chat, event_id, tuple(buttons), key)
        return event_id

    async def send_file(
        self, chat: ChatRef, path: Path, *, key: str, reply_to: str | None = None
    ) -> str:
        """Upload the file to the homeserver's media repository, then post it as an
        `m.image` (known by its bytes) or `m.file` event under the key's transaction id."""
        data = await asyncio.to_thread(path.read_bytes)
        mime = files.mime_type(path.name, data)
        response, _ = await self._client.upload(
            io.BytesIO(data), content_type=mime, filename=path.name, filesize=len(data)
        )
        uploaded = _check(response)
        content = {
            "msgtype": "m.image" if mime.startswith("image/") else "m.file",
            "body": path.name,
            "filename": path.name,
            "url": uploaded.content_uri,
            "info": {"mimetype": mime, "size": len(data)},
        }
        return await self._post(chat, content, key, reply_to)

    async def _post(
        self, chat: ChatRef, content: dict[str, Any], key: str, reply_to: str | None
    ) -> str:
        """Send a room message into the chat's thread (or as a reply to `reply_to`)."""
        if chat.thread_id:
            content["m.relates_to"] = {
                "rel_type": "m.thread",
                "event_id": chat.thread_id,
                "is_falling_back": reply_to is None,
                "m.in_reply_to": {"event_id": reply_to or chat.thread_id},
            }
        elif reply_to:
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        event_id = await self._room_send(chat.chat_id, "m.room.message", content, key)
        _remember(self._sent, event_id, None)
        return event_id

    async def _offer(
        self, chat: ChatRef, event_id: str, buttons: tuple[Button, ...], key: str
    ) -> None:
        _remember(self._questions, event_id, buttons[: len(CHOICES)])
        _remember(self._question_thread, event_id, chat.thread_id)
        for index in range(min(len(buttons), len(CHOICES))):
            annotation = {"rel_type": "m.annotation", "event_id": event_id, "key": CHOICES[index]}
            await self._room_send(
                chat.chat_id, "m.reaction", {"m.relates_to": annotation}, f"{key}/choice{index}"
            )

    async def edit(
        self, chat: ChatRef, message_id: str, text: str, *, buttons: Sequence[Button] = ()
    ) -> None:
        body = _with_choices(text, buttons)
        content = {
            "msgtype": "m.text",
            "body": f"* {body}",
            "m.new_content": {"msgtype": "m.text", "body": body},
            "m.relates_to": {"rel_type": "m.replace", "event_id": message_id},
        }
        await self._room_send(chat.chat_id, "m.room.message", content, uuid.uuid4().hex)
        if buttons and message_id not in self._questions:
            await self._offer(chat, message_id, tuple(buttons), message_id)
        elif not buttons:
            self._questions.pop(message_id, None)  # withdrawn or answered: no more presses

    async def typing(self, chat: ChatRef, *, active: bool = True) -> None:
        with contextlib.suppress(Exception):  # a lost typing notice is not worth an error
            await self._client.room_typing(chat.chat_id, active, timeout=10000)

    async def _room_send(self, room_id: str, kind: str, content: dict[str, Any], key: str) -> str:
        txn = hashlib.sha256(key.encode()).hexdigest()[:32]
        response = _check(await self._client.room_send(room_id, kind, content, tx_id=txn))
        return str(response.event_id)


def _check(response: Any) -> Any:
    """The response, or the error it carries as `RateLimited`, `PlatformError` or
    `ConnectionError` (the gateway retries the last)."""
    from nio import ErrorResponse

    if not isinstance(response, ErrorResponse):
        return response
    code = str(response.status_code or "")
    if code in ("M_LIMIT_EXCEEDED", "429"):
        raise RateLimited((response.retry_after_ms or 1000) / 1000, response.message or "")
    if code in FINAL_ERRORS:
        raise PlatformError(f"matrix: {code}: {response.message}")
    raise ConnectionError(f"matrix: {code or 'error'}: {response.message}")


def _with_choices(text: str, buttons: Sequence[Button]) -> str:
    if not buttons:
        return text
    lines = [f"{CHOICES[i]} {button.label}" for i, button in enumerate(buttons[: len(CHOICES)])]
    return f"{text}\n\n" + "\n".join(lines) + "\n(react with a number, or reply with it)"


def _without_reply_fallback(body: str) -> str:
    """A reply's body without the quoted original clients put before it."""
    lines = body.split("\n")
    if not lines or not lines[0].startswith("> "):
        return body
    while lines and lines[0].startswith(">"):
        lines.pop(0)
    return "\n".join(lines).lstrip("\n")


def _remember(cache: OrderedDict[str, Any], key: str, value: Any) -> None:
    cache[key] = value
    while len(cache) > REMEMBERED:
        cache.popitem(last=False)


def create(name: str, settings: Mapping[str, Any]) -> MatrixPlatform:
    return MatrixPlatform(name, MatrixSettings.parse(settings))
