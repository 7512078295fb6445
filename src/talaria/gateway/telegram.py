"""Telegram through the Bot API, with python-telegram-bot (`talaria[telegram]`).

Updates come by long polling (`getUpdates`); an update is confirmed (the next call's
`offset`) only after the gateway has recorded it. Buttons are inline keyboards whose
callback data is the button's value; a press is acknowledged (`answerCallbackQuery`) once
handed over. A flood refusal (HTTP 429 with `parameters.retry_after`) becomes `RateLimited`.
`base_url` points the bot at another Bot API server (a local one, or a test's); files are
downloaded from the same server (`.../file/bot<token>/<file_path>`, after `getFile`). A photo
(its largest size) or a document becomes an `Attachment` downloaded only once the sender may
talk; files go back by `sendPhoto` (an image by its bytes) or `sendDocument`.

While the Bot API is out of reach, polling waits longer after each failure (2 s doubling to
60 s); a send whose connection never opened is `NotSent` (nothing reached Telegram, so the
outbox waits without using up an attempt or marking the text as possibly repeated).

Settings: `token` (from @BotFather), `base_url`, `poll_timeout` (seconds, default 25).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import logging
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, InputFile, Message, Update
from telegram import error as tg_error
from telegram.request import HTTPXRequest
from telegram.warnings import PTBDeprecationWarning

from talaria.gateway.platform import (
    Attachment,
    Button,
    ButtonPress,
    Capabilities,
    ChatRef,
    Inbound,
    NotSent,
    PlatformError,
    RateLimited,
    Sink,
    Sleep,
    end_tasks,
)
from talaria.messages.media import image_type

log = logging.getLogger("talaria.gateway.telegram")

MAX_LEN = 4096
RETRY_NETWORK_S = 2.0
MAX_RETRY_S = 60.0
NOTHING_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""httpx's errors raised before a request left: Telegram cannot have seen it."""


class TelegramPlatform:
    capabilities = Capabilities(
        can_edit=True, max_len=MAX_LEN, buttons=True, typing=True, threads=True
    )

    def __init__(
        self, name: str, settings: Mapping[str, Any], *, sleep: Sleep = asyncio.sleep
    ) -> None:
        token = settings.get("token")
        if not token:
            raise ValueError(f"gateway.platforms.{name}.token: the bot's token is required")
        self.name = name
        self.poll_timeout = int(settings.get("poll_timeout", 25))
        base_url = str(settings.get("base_url") or "https://api.telegram.org/bot")
        self.bot = Bot(
            str(token),
            base_url=base_url,
            base_file_url=_file_url(base_url),
            get_updates_request=HTTPXRequest(read_timeout=self.poll_timeout + 10),
        )
        self.username = ""
        self.bot_id = 0
        self._sleep = sleep
        self._task: asyncio.Task[None] | None = None

    async def start(self, sink: Sink) -> None:
        await self.bot.initialize()
        self.username, self.bot_id = self.bot.username or "", self.bot.id
        self._task = asyncio.create_task(self._poll(sink))

    async def stop(self) -> None:
        await end_tasks(self._task)
        with contextlib.suppress(Exception):
            await self.bot.shutdown()

    async def _poll(self, sink: Sink) -> None:
        offset: int | None = None
        wait = RETRY_NETWORK_S
        while True:
            try:
                updates = await self.bot.get_updates(
                    offset=offset,
                    timeout=self.poll_timeout,
                    allowed_updates=["message", "callback_query"],
                )
            except tg_error.RetryAfter as refused:
                await self._sleep(_retry_seconds(refused))
                continue
            except (tg_error.NetworkError, tg_error.TelegramError) as exc:
                log.warning("telegram: getUpdates failed (%s); retrying in %.0f s", exc, wait)
                await self._sleep(wait)
                wait = min(wait * 2, MAX_RETRY_S)
                continue
            wait = RETRY_NETWORK_S
            for update in updates:
                try:
                    await self._hand_over(update, sink)
                except Exception:  # not recorded: not confirmed, so Telegram sends it again
                    log.exception("telegram: update %s not taken; retrying", update.update_id)
                    await self._sleep(RETRY_NETWORK_S)
                    break
                offset = update.update_id + 1

    async def _hand_over(self, update: Update, sink: Sink) -> None:
        if update.callback_query is not None:
            query = update.callback_query
            message = query.message
            if not isinstance(message, Message) or not query.data:
                return
            chat = self._chat(message.chat.id, _thread(message))
            await sink(
                ButtonPress(chat, str(query.from_user.id), query.data,
                            message_id=str(message.message_id), press_id=query.id)
            )  # fmt: skip
            with contextlib.suppress(tg_error.TelegramError):
                await self.bot.answer_callback_query(query.id)
            return
        message = update.message
        if message is None or message.from_user is None:
            return
        if message.text is None and not (message.photo or message.document):
            return
        await sink(self.inbound(message))

    def _chat(self, chat_id: int, thread: int | None) -> ChatRef:
        return ChatRef(self.name, str(chat_id), str(thread) if thread is not None else None)

    def inbound(self, message: Message) -> Inbound:
        text = message.text or message.caption or ""
        mention = f"@{self.username}" if self.username else ""
        replied = message.reply_to_message
        sender = message.from_user
        assert sender is not None
        return Inbound(
            self._chat(message.chat.id, _thread(message)),
            f"{message.chat.id}/{message.message_id}",
            str(sender.id),
            text.replace(mention, "").strip() if mention else text,
            sender_name=sender.full_name,
            is_direct=message.chat.type == "private",
            mentioned=bool(mention) and mention in text,
            reply_to_bot=bool(
                replied and replied.from_user and replied.from_user.id == self.bot_id
            ),
            attachments=self._attachments(message),
            raw=message.to_dict(),
        )

    def _attachments(self, message: Message) -> tuple[Attachment, ...]:
        number = message.message_id
        if message.photo:
            photo = message.photo[-1]  # the largest size
            return (self._attachment(photo.file_id, f"photo-{number}.jpg", "image/jpeg",
                                     photo.file_size),)  # fmt: skip
        document = message.document
        if document is None:
            return ()
        name = document.file_name or f"file-{number}"
        mime = document.mime_type or "application/octet-stream"
        return (self._attachment(document.file_id, name, mime, document.file_size),)

    def _attachment(self, file_id: str, name: str, mime: str, size: int | None) -> Attachment:
        fetch = functools.partial(self.fetch_file, file_id)
        return Attachment(name, mime, size=size, url=file_id, fetch=fetch)

    async def fetch_file(self, url: str) -> bytes:
        """The bytes of the file with this file id (`getFile`, then the download)."""
        with _translated():
            found = await self.bot.get_file(url)
            return bytes(await found.download_as_bytearray())

    async def send(
        self,
        chat: ChatRef,
        text: str,
        *,
        key: str,
        buttons: Sequence[Button] = (),
        reply_to: str | None = None,
    ) -> str:
        reply_id = _message_number(reply_to, chat)
        with _translated():
            sent = await self.bot.send_message(
                chat_id=int(chat.chat_id),
                text=text,
                reply_markup=_keyboard(buttons),
                message_thread_id=int(chat.thread_id) if chat.thread_id else None,
                reply_to_message_id=reply_id,
                allow_sending_without_reply=True if reply_id else None,
            )
        return str(sent.message_id)

    async def edit(
        self, chat: ChatRef, message_id: str, text: str, *, buttons: Sequence[Button] = ()
    ) -> None:
        with _translated(unchanged_ok=True):
            await self.bot.edit_message_text(
                text=text,
                chat_id=int(chat.chat_id),
                message_id=int(message_id),
                reply_markup=_keyboard(buttons),
            )

    async def send_file(
        self, chat: ChatRef, path: Path, *, key: str, reply_to: str | None = None
    ) -> str:
        data = await asyncio.to_thread(path.read_bytes)
        send = self.bot.send_photo if image_type(data) else self.bot.send_document
        reply_id = _message_number(reply_to, chat)
        with _translated():
            sent = await send(
                int(chat.chat_id),
                InputFile(data, filename=path.name),
                message_thread_id=int(chat.thread_id) if chat.thread_id else None,
                reply_to_message_id=reply_id,
                allow_sending_without_reply=True if reply_id else None,
            )
        return str(sent.message_id)

    async def typing(self, chat: ChatRef, *, active: bool = True) -> None:
        """`sendChatAction`; the Bot API has no way to end it: it ends within 5 s by itself."""
        if not active:
            return
        with _translated():
            await self.bot.send_chat_action(
                chat_id=int(chat.chat_id),
                action="typing",
                message_thread_id=int(chat.thread_id) if chat.thread_id else None,
            )


def _file_url(base_url: str) -> str:
    """Where the server's files are: `<host>/file/bot` beside `<host>/bot`."""
    host, _, _ = base_url.rstrip("/").rpartition("/bot")
    return f"{host}/file/bot" if host else base_url.rstrip("/") + "/file/bot"


def _from(message: Message | None, user_id: int) -> bool:
    return bool(message and message.from_user and message.from_user.id == user_id)


def _thread(message: Message) -> int | None:
    return message.message_thread_id if message.is_topic_message else None


def _message_number(reply_to: str | None, chat: ChatRef) -> int | None:
    """The Telegram message number of an inbound id (`<chat>/<message>`) of this chat."""
    if not reply_to:
        return None
    chat_id, _, number = reply_to.partition("/")
    return int(number) if chat_id == chat.chat_id and number.isdigit() else None


def _keyboard(buttons: Sequence[Button]) -> InlineKeyboardMarkup | None:
    if not buttons:
        return None
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(b.label, callback_data=b.value)] for b in buttons]
    )


def _retry_seconds(refused: tg_error.RetryAfter) -> float:
    """The wait a 429 asked for (read without the library's warning that its type will
    change: both types are handled)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = refused.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


@contextlib.contextmanager
def _translated(unchanged_ok: bool = False) -> Any:
    """python-telegram-bot's errors as the gateway's: 429 -> RateLimited, a refusal that
    cannot change -> PlatformError; "message is not modified" is no error for an edit."""
    try:
        yield
    except tg_error.RetryAfter as refused:
        raise RateLimited(_retry_seconds(refused)) from None
    except tg_error.BadRequest as exc:
        if unchanged_ok and "not modified" in str(exc).lower():
            return
        raise PlatformError(str(exc)) from None
    except (tg_error.Forbidden, tg_error.InvalidToken) as exc:
        raise PlatformError(str(exc)) from None
    except tg_error.NetworkError as exc:
        if isinstance(exc.__cause__, NOTHING_SENT):
            raise NotSent(str(exc)) from exc
        raise


def create(name: str, settings: Mapping[str, Any]) -> TelegramPlatform:
    return TelegramPlatform(name, settings)
