"""An in-memory chat platform: a test double for the gateway and a reference for adapters.

`FakePlatform` keeps what the bot posted (`messages`, with every edit) and lets a test play
the users (`deliver`). It keeps the `Platform` contract to the letter (an update is "acked"
only after the sink returned; `send` raises `RateLimited` while a flood is set), so a test of
the gateway against it tests what a real adapter will see. Configure it as
`gateway.platforms.<name>: {type: fake, can_edit: false, ...}` (any `Capabilities` field).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from talaria.gateway.platform import (
    Button,
    ButtonPress,
    Capabilities,
    ChatRef,
    Inbound,
    RateLimited,
    Sink,
    Update,
)

WAIT_S = 30.0
"""How long `wait_for` waits before failing the test (state, not timing, decides)."""


@dataclass
class FakeMessage:
    """One message the bot posted, as the user sees it now."""

    chat: ChatRef
    id: str
    text: str
    buttons: tuple[Button, ...] = ()
    key: str = ""
    reply_to: str | None = None
    edits: list[str] = field(default_factory=list)
    """Earlier texts, oldest first."""


class FakePlatform:
    def __init__(self, name: str = "fake", capabilities: Capabilities | None = None) -> None:
        self.name = name
        self.capabilities = capabilities or Capabilities(
            can_edit=True, max_len=4000, buttons=True, typing=True, threads=True
        )
        self.messages: list[FakeMessage] = []
        self.acked: list[Update] = []
        """Updates whose sink call returned (what a real adapter would acknowledge)."""
        self.typing_calls: list[tuple[ChatRef, bool]] = []
        """Each `typing` call: the chat, and whether the bot was shown typing or no longer."""
        self.refused = 0
        """Sends refused with `RateLimited` so far."""
        self._flood: list[float] = []
        self._sink: Sink | None = None
        self._ids = itertools.count(1)
        self._changed = asyncio.Condition()

    # ---- the Platform protocol ------------------------------------------------------------

    async def start(self, sink: Sink) -> None:
        self._sink = sink

    async def stop(self) -> None:
        self._sink = None

    async def send(
        self,
        chat: ChatRef,
        text: str,
        *,
        key: str,
        buttons: Sequence[Button] = (),
        reply_to: str | None = None,
    ) -> str:
        if self._flood:
            self.refused += 1
            raise RateLimited(self._flood.pop(0))
        if self.capabilities.dedupes_sends:
            for message in self.messages:
                if message.key == key:
                    return message.id
        message = FakeMessage(chat, f"m{next(self._ids)}", text, tuple(buttons), key, reply_to)
        self.messages.append(message)
        await self._notify()
        return message.id

    async def edit(
        self, chat: ChatRef, message_id: str, text: str, *, buttons: Sequence[Button] = ()
    ) -> None:
        message = self.message(message_id)
        if message.chat != chat:
            raise AssertionError(f"edit of {message_id} in {chat}: it lives in {message.chat}")
        if not self.capabilities.can_edit:
            raise AssertionError("edit called on a platform that cannot edit")
        message.edits.append(message.text)
        message.text, message.buttons = text, tuple(buttons)
        await self._notify()

    async def typing(self, chat: ChatRef, *, active: bool = True) -> None:
        self.typing_calls.append((chat, active))

    # ---- the test's side ------------------------------------------------------------------

    async def deliver(self, update: Update) -> None:
        """The platform hands `update` to the gateway (again, for a redelivery)."""
        if self._sink is None:
            raise RuntimeError(f"platform {self.name} is not started")
        await self._sink(update)
        self.acked.append(update)

    def flood(self, *retry_after: float) -> None:
        """Refuse the next sends, one per value, each with that retry-after."""
        self._flood.extend(retry_after)

    def message(self, message_id: str) -> FakeMessage:
        for message in self.messages:
            if message.id == message_id:
                return message
        raise KeyError(message_id)

    def in_chat(self, chat: ChatRef) -> list[FakeMessage]:
        return [message for message in self.messages if message.chat == chat]

    async def wait_for(
        self, check: Callable[[FakeMessage], bool], timeout: float = WAIT_S
    ) -> FakeMessage:
        """The first posted message that passes `check` (as it is now), waiting for it."""

        def found() -> FakeMessage | None:
            return next((m for m in self.messages if check(m)), None)

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(found), timeout)
        message = found()
        assert message is not None
        return message

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()


def user_message(
    text: str,
    *,
    chat: ChatRef | None = None,
    sender: str = "alice",
    message_id: str | None = None,
    **flags: Any,
) -> Inbound:
    """A user's message for `deliver` (a direct message from alice unless told otherwise)."""
    where = chat or ChatRef("fake", f"dm-{sender}")
    flags.setdefault("is_direct", chat is None)
    ident = message_id or f"in-{next(_inbound_ids)}"
    return Inbound(where, ident, sender, text, sender_name=sender, **flags)


def press(message: FakeMessage, value: str, sender: str = "alice") -> ButtonPress:
    """`sender` presses the button with `value` under `message`."""
    return ButtonPress(message.chat, sender, value, message_id=message.id)


_inbound_ids = itertools.count(1)


def create(name: str, settings: Mapping[str, Any]) -> FakePlatform:
    known = {f.name for f in fields(Capabilities)}
    return FakePlatform(name, Capabilities(**{k: v for k, v in settings.items() if k in known}))
