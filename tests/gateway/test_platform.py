"""The platform interface as the in-memory fake keeps it: what every adapter must do."""

from __future__ import annotations

import pytest

from talaria.gateway import fake
from talaria.gateway.platform import (
    ADAPTERS,
    Button,
    ChatRef,
    Platform,
    RateLimited,
    Update,
)


async def test_fake_platform_keeps_the_platform_contract() -> None:
    platform = fake.create("fake", {"can_edit": True, "buttons": True, "max_len": 100})
    assert isinstance(platform, Platform)
    assert platform.capabilities.max_len == 100
    seen: list[Update] = []

    async def sink(update: Update) -> None:
        assert update not in platform.acked  # acknowledged only after the sink returned
        seen.append(update)

    await platform.start(sink)
    message = fake.user_message("hello")
    await platform.deliver(message)
    assert seen == [message] and platform.acked == [message]

    chat = message.chat
    sent = await platform.send(chat, "pick", key="k1", buttons=[Button("Yes", "r1:once")])
    await platform.edit(chat, sent, "picked")
    posted = platform.message(sent)
    assert (posted.text, posted.edits, posted.buttons) == ("picked", ["pick"], ())
    with pytest.raises(AssertionError):
        await platform.edit(ChatRef("fake", "elsewhere"), sent, "wrong room")


async def test_a_flooded_send_raises_rate_limited_with_its_retry_after() -> None:
    platform = fake.FakePlatform()
    platform.flood(2.5)
    chat = ChatRef("fake", "room")
    with pytest.raises(RateLimited) as refused:
        await platform.send(chat, "hi", key="a")
    assert refused.value.retry_after == 2.5 and platform.messages == []
    await platform.send(chat, "hi", key="a")
    assert [m.text for m in platform.messages] == ["hi"]


async def test_a_platform_that_dedupes_sends_makes_one_message_per_key() -> None:
    platform = fake.create("fake", {"dedupes_sends": True})
    chat = ChatRef("fake", "room")
    first = await platform.send(chat, "answer", key="turn-1/0")
    again = await platform.send(chat, "answer", key="turn-1/0")
    assert first == again and len(platform.messages) == 1


def test_every_adapter_module_is_named_under_the_gateway_package() -> None:
    assert all(module.startswith("talaria.gateway.") for module in ADAPTERS.values())
    assert ADAPTERS["fake"] == fake.__name__
