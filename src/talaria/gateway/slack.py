"""Slack through the official slack_sdk in Socket Mode (`talaria[slack]`): no public URL needed.

Events arrive as Socket Mode envelopes; an envelope is acknowledged only after the gateway
has recorded its message, so Slack redelivers what a crash lost (and the ledger drops the
repeat by the message's channel and `ts`). Answers go out with `chat.postMessage` (in the
thread of the message they answer), progress and streaming with `chat.update`, questions as
Block Kit buttons whose presses come back as `block_actions`. HTTP 429 becomes
`RateLimited` with the `Retry-After` header's seconds. Files a user shares are downloaded from
their `url_private_download` with the bot token (Slack's files need it: the `files:read`
scope); files sent back go through the SDK's upload flow (`files.getUploadURLExternal`, the
upload, `files.completeUploadExternal`, which posts them in the chat's thread).

Settings: `bot_token` (xoxb-, the Web API), `app_token` (xapp-, Socket Mode), `base_url`
(another Web API root, e.g. a test's).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from talaria.gateway import files
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
)

log = logging.getLogger("talaria.gateway.slack")

MAX_LEN = 3000
"""A section block's text limit (plain messages may be longer; one limit keeps it simple)."""
FINAL_ERRORS = frozenset(
    {"channel_not_found", "not_in_channel", "is_archived", "msg_too_long", "no_text",
     "message_not_found", "cant_update_message", "invalid_auth", "account_inactive"}
)  # fmt: skip
IGNORED_SUBTYPES = frozenset({"message_changed", "message_deleted", "bot_message"})


class SlackPlatform:
    capabilities = Capabilities(can_edit=True, max_len=MAX_LEN, buttons=True, threads=True)

    def __init__(self, name: str, settings: Mapping[str, Any]) -> None:
        bot_token, app_token = settings.get("bot_token"), settings.get("app_token")
        if not bot_token or not app_token:
            raise ValueError(f"gateway.platforms.{name}: bot_token and app_token are required")
        self.name = name
        base_url = str(settings.get("base_url") or "https://slack.com/api/")
        self.web = AsyncWebClient(token=str(bot_token), base_url=base_url)
        self.app_token = str(app_token)
        self.bot_user = ""
        self._socket: SocketModeClient | None = None
        self._sink: Sink | None = None

    async def start(self, sink: Sink) -> None:
        me = await self.web.auth_test()
        self.bot_user = str(me["user_id"])
        self._sink = sink
        self._socket = SocketModeClient(self.app_token, web_client=self.web)
        self._socket.socket_mode_request_listeners.append(self._on_request)  # type: ignore[arg-type]
        await self._socket.connect()

    async def stop(self) -> None:
        if self._socket is not None:
            await self._socket.close()
        self._socket = None

    async def _on_request(self, client: SocketModeClient, request: SocketModeRequest) -> None:
        update = self.update(request.type, request.payload)
        if update is not None and self._sink is not None:
            await self._sink(update)
        await client.send_socket_mode_response(SocketModeResponse(request.envelope_id))

    def update(self, kind: str, payload: Mapping[str, Any]) -> Inbound | ButtonPress | None:
        """What an envelope means to the gateway (None: nothing it answers)."""
        if kind == "interactive" and payload.get("type") == "block_actions":
            return self._press(payload)
        event = payload.get("event") or {}
        if kind != "events_api" or event.get("type") != "message":
            return None
        if event.get("bot_id") or event.get("subtype") in IGNORED_SUBTYPES or not event.get("user"):
            return None
        text = str(event.get("text") or "")
        mention = f"<@{self.bot_user}>"
        thread = event.get("thread_ts")
        channel = str(event["channel"])
        return Inbound(
            ChatRef(self.name, channel, str(thread) if thread else None),
            f"{channel}/{event['ts']}",
            str(event["user"]),
            re.sub(rf"\s*{re.escape(mention)}\s*", " ", text).strip(),
            is_direct=event.get("channel_type") == "im",
            mentioned=mention in text,
            reply_to_bot=event.get("parent_user_id") == self.bot_user,
            attachments=self._attachments(event),
            raw=dict(event),
        )

    def _attachments(self, event: Mapping[str, Any]) -> tuple[Attachment, ...]:
        """The files shared with a message (`file_share`), downloaded only when fetched."""
        shared = []
        for file in event.get("files") or ():
            url = str(file.get("url_private_download") or file.get("url_private") or "")
            if not url:
                continue  # a file Slack only describes (`check_file_info`): not offered
            shared.append(
                Attachment(
                    str(file.get("name") or file.get("title") or "file"),
                    str(file.get("mimetype") or "application/octet-stream"),
                    url=url,
                    size=int(file.get("size") or 0) or None,
                    fetch=functools.partial(self.fetch_file, url),
                )
            )
        return tuple(shared)

    async def fetch_file(self, url: str) -> bytes:
        """A shared file's bytes, with the bot token (without `files:read`, Slack answers with
        a redirect to its sign-in page, which is refused)."""
        return await files.download(url, {"Authorization": f"Bearer {self.web.token}"})

    def _press(self, payload: Mapping[str, Any]) -> ButtonPress | None:
        actions = payload.get("actions") or []
        channel = (payload.get("channel") or {}).get("id")
        message = payload.get("message") or {}
        if not actions or not channel:
            return None
        thread = message.get("thread_ts")
        return ButtonPress(
            ChatRef(self.name, str(channel), str(thread) if thread else None),
            str((payload.get("user") or {}).get("id")),
            str(actions[0].get("value")),
            message_id=str(message.get("ts") or ""),
            press_id=str(payload.get("trigger_id") or ""),
        )

    async def send(
        self,
        chat: ChatRef,
        text: str,
        *,
        key: str,
        buttons: Sequence[Button] = (),
        reply_to: str | None = None,
    ) -> str:
        with _translated():
            sent = await self.web.chat_postMessage(
                channel=chat.chat_id, text=text, blocks=_blocks(text, buttons),
                thread_ts=chat.thread_id,
            )  # fmt: skip
        return str(sent["ts"])

    async def send_file(
        self, chat: ChatRef, path: Path, *, key: str, reply_to: str | None = None
    ) -> str:
        """Upload the file and share it in the chat (its thread); the file's id."""
        data = await asyncio.to_thread(path.read_bytes)
        with _translated():
            done = await self.web.files_upload_v2(
                channel=chat.chat_id, file=data, filename=path.name, title=path.name,
                thread_ts=chat.thread_id,
            )  # fmt: skip
        return str(done["file"]["id"])

    async def edit(
        self, chat: ChatRef, message_id: str, text: str, *, buttons: Sequence[Button] = ()
    ) -> None:
        with _translated():
            await self.web.chat_update(
                channel=chat.chat_id, ts=message_id, text=text, blocks=_blocks(text, buttons)
            )

    async def typing(self, chat: ChatRef, *, active: bool = True) -> None:
        """Slack shows no typing indicator for bots."""


def _blocks(text: str, buttons: Sequence[Button]) -> list[dict[str, Any]] | None:
    if not buttons:
        return None
    elements = [
        {"type": "button", "text": {"type": "plain_text", "text": b.label},
         "value": b.value, "action_id": f"talaria-{n}"}
        for n, b in enumerate(buttons)
    ]  # fmt: skip
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": text}},
        {"type": "actions", "elements": elements},
    ]


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    """slack_sdk's errors as the gateway's: 429 -> RateLimited, a final error -> PlatformError."""
    try:
        yield
    except SlackApiError as exc:
        response = exc.response
        if response.status_code == 429:
            raise RateLimited(float(response.headers.get("Retry-After", 1))) from None
        if response.get("error") in FINAL_ERRORS:
            raise PlatformError(str(response.get("error"))) from None
        raise


def create(name: str, settings: Mapping[str, Any]) -> SlackPlatform:
    return SlackPlatform(name, settings)
