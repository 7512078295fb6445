"""The XMPP adapter against a real Prosody: what a person in an XMPP client sees of the bot's
messages and corrections, and what the bot receives in chats and rooms."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from started_adapter import Started
from xmpp_server import DOMAIN, MUC, XmppServer, XmppUser, xmpp_server  # noqa: F401

from talaria.gateway.xmpp import XmppPlatform, create

pytestmark = pytest.mark.prosody
ROOM = f"lounge@{MUC}"


Bot = Started[XmppPlatform]


@pytest.fixture
async def bot(xmpp_server: XmppServer) -> AsyncIterator[Bot]:  # noqa: F811
    settings = {
        "jid": f"bot@{DOMAIN}",
        "password": xmpp_server.passwords[f"bot@{DOMAIN}"],
        "host": "127.0.0.1",
        "port": xmpp_server.port,
        "tls": "none",
        "rooms": [ROOM],
        "resource": uuid.uuid4().hex[:6],
    }
    async with Started(create("xmpp", settings)) as started:
        yield started


@pytest.fixture
async def alice(xmpp_server: XmppServer) -> AsyncIterator[XmppUser]:  # noqa: F811
    async with XmppUser(xmpp_server, "alice") as user:
        yield user


async def test_a_chat_message_and_its_answer_corrected_in_place(bot: Bot, alice: XmppUser) -> None:
    sent = alice.say(f"bot@{DOMAIN}", "hello bot")
    inbound = await bot.next_message()
    assert (inbound.text, inbound.sender_id, inbound.message_id) == ("hello bot", alice.jid, sent)
    assert inbound.is_direct and inbound.chat.chat_id == alice.jid

    await bot.platform.typing(inbound.chat)
    await alice.wait_for(lambda: "composing" in alice.states)
    answer = await bot.platform.send(inbound.chat, "thinking", key="turn1/0")
    await bot.platform.edit(inbound.chat, answer, "the answer is 42")
    shown = await alice.wait_for(lambda: [m for m in alice.received if m.edits])
    assert [(m.id, m.body, m.edits) for m in shown] == [(answer, "the answer is 42", ["thinking"])]


async def test_in_a_room_the_bot_knows_when_it_is_addressed(bot: Bot, alice: XmppUser) -> None:
    await alice.join(ROOM, "alice")
    alice.say(ROOM, "just chatting", room=True)
    chatting = await bot.next_message()
    assert chatting.chat.chat_id == ROOM and not chatting.is_direct and not chatting.mentioned
    assert chatting.sender_id == alice.jid  # the room shows real addresses

    alice.say(ROOM, "talaria: what is 2+2?", room=True)
    asked = await bot.next_message()
    assert asked.mentioned and asked.text == "talaria: what is 2+2?"
    await bot.platform.send(asked.chat, "4", key="a1")
    shown = await alice.wait_for(
        lambda: [m for m in alice.received if m.kind == "groupchat" and m.body == "4"]
    )
    assert shown[0].sender == f"{ROOM}/talaria"
