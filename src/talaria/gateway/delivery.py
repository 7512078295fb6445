"""Sending answers so that none is lost, doubled, late without reason, or misdirected.

Every answer part is in the ledger (pending) before its first send; the `Outbox` sends it,
waits out a platform's flood refusal (`RateLimited.retry_after`), backs off on other errors
(after which the part may have arrived, unless the platform said `NotSent`), and marks it
sent with the platform's message id. Parts of one chat go out one at a time, in order.
At start, what a previous process left pending is sent first: a part that may already have
arrived (an attempt was made) is marked as possibly repeated, unless the platform
de-duplicates sends by key. A file an answer sends back is a part too (`OutboundPart.file`),
sent after the answer's text; it cannot carry the mark, so a resent file may arrive twice
where the platform does not de-duplicate.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path

from talaria.gateway.platform import (
    ChatRef,
    NotSent,
    Platform,
    PlatformError,
    RateLimited,
    SendsFiles,
    Sleep,
)
from talaria.offload import run_blocking
from talaria.store.ledger import DeliveryLedger, OutboundPart

log = logging.getLogger("talaria.gateway")

MAX_ATTEMPTS = 8
FIRST_BACKOFF_S = 0.5
MAX_WAIT_S = 300.0
"""The longest single wait, whatever a platform's retry-after says."""
REPEAT_MARK = "(sent again after a restart; you may see this twice)\n"


def chat_of(part: OutboundPart) -> ChatRef:
    return ChatRef(part.platform, part.chat_id, part.thread_id)


class Outbox:
    """One platform's sending side."""

    def __init__(
        self, platform: Platform, ledger: DeliveryLedger, sleep: Sleep = asyncio.sleep
    ) -> None:
        self.platform = platform
        self.ledger = ledger
        self.sleep = sleep
        self._locks: dict[ChatRef, asyncio.Lock] = {}

    def lock(self, chat: ChatRef) -> asyncio.Lock:
        """Held while a chat's parts go out, so they arrive in order."""
        return self._locks.setdefault(chat, asyncio.Lock())

    async def post(self, parts: list[OutboundPart], inbound: tuple[str, str] | None = None) -> None:
        """Record `parts` (finishing `inbound`, the update they answer), then send them."""
        await run_blocking(self.ledger.ledger_record_answer, parts, inbound)
        if parts:
            async with self.lock(chat_of(parts[0])):
                for part in parts:
                    await self.deliver(part)

    async def resend_pending(self) -> None:
        """Send what a previous process recorded but never saw confirmed."""
        pending = await run_blocking(self.ledger.ledger_pending, self.platform.name)
        for part in pending:
            async with self.lock(chat_of(part)):
                await self.deliver(part, maybe_sent=part.attempts > 0)

    async def deliver(self, part: OutboundPart, *, maybe_sent: bool = False) -> str | None:
        """Send one part until the platform confirms it; its message id (None: dropped for
        good, or still pending after `MAX_ATTEMPTS`, to be sent at the next start). While the
        platform is out of reach (`NotSent`) it keeps waiting: no attempt is used up."""
        backoff = FIRST_BACKOFF_S
        attempts = 0
        while attempts < MAX_ATTEMPTS:
            attempts += 1
            repeatable = not part.edit_of and not part.file
            if maybe_sent and not self.platform.capabilities.dedupes_sends and repeatable:
                part = replace(part, text=REPEAT_MARK + part.text)
                maybe_sent = False
            await run_blocking(self.ledger.ledger_count_attempt, part.id)
            try:
                message_id = await self._send(part)
            except RateLimited as refused:
                log.info("%s: rate limited, retrying in %.1f s", part.platform, refused.retry_after)
                await self.sleep(min(max(refused.retry_after, 0.0), MAX_WAIT_S))
                continue
            except PlatformError as exc:
                log.warning("%s refused part %s for good: %s", part.platform, part.id, exc)
                await run_blocking(self.ledger.ledger_mark_dropped, part.id)
                return None
            except Exception as exc:
                log.warning("sending part %s failed (%s); retrying", part.id, exc)
                if isinstance(exc, NotSent):  # nothing left: waiting costs no attempt
                    attempts -= 1
                else:
                    maybe_sent = True  # it may have arrived before the error
                await self.sleep(backoff)
                backoff = min(backoff * 2, MAX_WAIT_S)
                continue
            await run_blocking(self.ledger.ledger_mark_sent, part.id, message_id)
            return message_id
        log.warning("part %s is still unsent after %d attempts", part.id, MAX_ATTEMPTS)
        return None

    async def _send(self, part: OutboundPart) -> str:
        chat = chat_of(part)
        if part.file:
            return await self._send_file(chat, Path(part.file), part)
        if part.edit_of:
            await self.platform.edit(chat, part.edit_of, part.text)
            return part.edit_of
        return await self.platform.send(chat, part.text, key=part.id, reply_to=part.reply_to)

    async def _send_file(self, chat: ChatRef, path: Path, part: OutboundPart) -> str:
        platform = self.platform
        if not isinstance(platform, SendsFiles):
            raise PlatformError(f"{platform.name} cannot send files")
        if path.is_symlink() or not path.is_file():  # checked resolved when recorded
            raise PlatformError(f"{path} is gone or was replaced")
        return await platform.send_file(chat, path, key=part.id, reply_to=part.reply_to)
