"""The gateway: platforms in, chats, sessions and the ledger in the middle, answers out.

An update is written to the ledger before its platform is told it arrived, and a redelivered
one is dropped there; a stranger's message stops at the access check (no agent is built for
it). Each chat then handles its messages in order (`ChatSession`). At start, each platform
connects, sends what a previous process left pending, then handles the updates that process
took in but never answered (in the background: a platform out of reach holds up no other).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
from dataclasses import dataclass, field
from typing import Any

from talaria.config_schema import default_for
from talaria.gateway import access
from talaria.gateway.chat import AgentFactory, ChatSession, GatewayContext, GatewayStore
from talaria.gateway.delivery import Outbox
from talaria.gateway.platform import (
    ADAPTERS,
    Attachment,
    ButtonPress,
    ChatRef,
    FetchesFiles,
    Inbound,
    Platform,
    Sleep,
    Update,
    end_tasks,
)
from talaria.gateway.settings import PlatformSettings
from talaria.gateway.view import ChatUI
from talaria.offload import run_blocking

log = logging.getLogger("talaria.gateway")


def load_platform(settings: PlatformSettings) -> Platform:
    """The adapter for `settings`, imported now (a missing extra is a clear error)."""
    module_name = ADAPTERS[settings.type]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RuntimeError(
            f"gateway.platforms.{settings.name}: the {settings.type} adapter needs "
            f"{exc.name or 'its library'}: pip install 'talaria[{settings.type}]'"
        ) from None
    platform: Platform = module.create(settings.name, settings.options)
    return platform


def payload(message: Inbound) -> dict[str, Any]:
    """What the ledger keeps of an update, to handle it again after a crash (of a file: how
    to download it again, never its bytes)."""
    return {
        "chat_id": message.chat.chat_id, "thread_id": message.chat.thread_id,
        "message_id": message.message_id, "sender_id": message.sender_id,
        "sender_name": message.sender_name, "text": message.text,
        "is_direct": message.is_direct, "mentioned": message.mentioned,
        "reply_to_bot": message.reply_to_bot,
        "files": [[a.name, a.mime_type, a.size, a.url] for a in message.attachments],
    }  # fmt: skip


def from_payload(platform: Platform, name: str, data: dict[str, Any]) -> Inbound:
    """The update again; its files are downloaded again where the platform can (else the
    chat says so)."""
    chat = ChatRef(name, data["chat_id"], data.get("thread_id"))
    refetch = platform.fetch_file if isinstance(platform, FetchesFiles) else None
    attachments = tuple(
        Attachment(file_name, mime, size=size, url=url,
                   fetch=functools.partial(refetch, url) if refetch and url else None)
        for file_name, mime, size, url in data.get("files") or ()
    )  # fmt: skip
    return Inbound(
        chat, data["message_id"], data["sender_id"], data["text"],
        sender_name=data.get("sender_name", ""), is_direct=bool(data.get("is_direct")),
        mentioned=bool(data.get("mentioned")), reply_to_bot=bool(data.get("reply_to_bot")),
        attachments=attachments,
    )  # fmt: skip


@dataclass
class Connected:
    """One platform at work."""

    settings: PlatformSettings
    platform: Platform
    ctx: GatewayContext
    chats: dict[ChatRef, ChatSession] = field(default_factory=dict)
    recovering: asyncio.Task[None] | None = None
    """Sending and handling what the previous process left (`Gateway.start`)."""


class Gateway:
    def __init__(
        self,
        platforms: list[tuple[PlatformSettings, Platform]],
        store: GatewayStore,
        make_agent: AgentFactory,
        *,
        edit_interval: float = float(default_for("gateway.edit_interval")),
        compress_at: float = float(default_for("gateway.compress_at")),
        pairing_code_ttl: float = float(default_for("gateway.pairing_code_ttl")),
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.store = store
        self.pairing_code_ttl = pairing_code_ttl
        self.connected: dict[str, Connected] = {}
        for settings, platform in platforms:

            def ui(
                chat: ChatRef, platform: Platform = platform, stream: bool = settings.stream
            ) -> ChatUI:
                return ChatUI(platform, chat, stream=stream, edit_interval=edit_interval)

            outbox = Outbox(platform, store, sleep)
            ctx = GatewayContext(settings, ui, outbox, store, make_agent, compress_at)
            self.connected[settings.name] = Connected(settings, platform, ctx)

    async def start(self) -> None:
        """Connect each platform; what a previous process left it is taken care of in a task
        of its own, so a platform out of reach again at once holds up no other."""
        for conn in self.connected.values():
            # read before connecting: what arrives while the platform starts is handled as it
            # arrives, and would be handled twice if it were in this list too
            unfinished = await run_blocking(
                self.store.ledger_unfinished_inbound, conn.settings.name
            )
            await conn.platform.start(functools.partial(self._received, conn))
            conn.recovering = asyncio.create_task(self._recover(conn, unfinished))

    async def _recover(self, conn: Connected, unfinished: list[dict[str, Any]]) -> None:
        """Send what was left pending (connected first: IRC cannot send before), then handle
        the updates taken in but never answered."""
        try:
            await conn.ctx.outbox.resend_pending()
            for data in unfinished:
                await self._handle(conn, from_payload(conn.platform, conn.settings.name, data))
        except Exception:
            log.exception("%s: taking up what the last run left failed", conn.settings.name)

    async def stop(self) -> None:
        """Stop the turns (what they completed is saved), then disconnect."""
        for conn in self.connected.values():
            await end_tasks(conn.recovering)
            for chat in conn.chats.values():
                await chat.close()
            await conn.platform.stop()

    def chat(self, platform: str, chat: ChatRef) -> ChatSession:
        """The chat's session handler (made on first use)."""
        conn = self.connected[platform]
        found = conn.chats.get(chat)
        if found is None:
            found = conn.chats[chat] = ChatSession(conn.ctx, chat)
        return found

    async def _received(self, conn: Connected, update: Update) -> None:
        """The sink each platform hands its updates to."""
        if update.chat.platform != conn.settings.name:
            log.warning("%s delivered an update for %s", conn.settings.name, update.chat)
            return
        if isinstance(update, ButtonPress):
            self.chat(conn.settings.name, update.chat).put(update)
            return
        new = await run_blocking(
            self.store.ledger_take_inbound,
            conn.settings.name,
            update.message_id,
            update.chat.key,
            payload(update),
        )
        if new:
            await self._handle(conn, update)

    async def _handle(self, conn: Connected, message: Inbound) -> None:
        name = conn.settings.name
        paired = await run_blocking(self.store.ledger_is_paired, name, message.sender_id)
        decided = access.verdict(conn.settings, message, paired)
        if decided is access.Verdict.TALK:
            self.chat(name, message.chat).put(message)
            return
        if decided is access.Verdict.PAIR:
            code = await run_blocking(
                self.store.ledger_request_pairing,
                name,
                message.sender_id,
                message.sender_name,
                access.new_code(),
                ttl=self.pairing_code_ttl,
            )
            chat = self.chat(name, message.chat)
            await chat.say(access.pairing_text(code), f"pair:{name}:{message.message_id}")
        await run_blocking(self.store.ledger_finish_inbound, name, message.message_id)
