"""The XMPP adapter against a real Prosody: what a person in an XMPP client sees of the bot's
messages and corrections, and what the bot receives in chats and rooms."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from started_adapter import Started
from tcp_proxy import TcpProxy
from xmpp_server import DOMAIN, MUC, XmppServer, XmppUser, xmpp_server  # noqa: F401

from gateway_support import Gate, running_gateway
from talaria.gateway.xmpp import XmppPlatform, create
from talaria.testing import ScriptedProvider, text

pytestmark = pytest.mark.prosody
ROOM = f"lounge@{MUC}"
BOT = f"bot@{DOMAIN}"


Bot = Started[XmppPlatform]


def bot_platform(server: XmppServer, port: int) -> XmppPlatform:
    settings = {
        "jid": BOT,
        "password": server.passwords[BOT],
        "host": "127.0.0.1",
        "port": port,
        "tls": "none",
        "rooms": [ROOM],
        "resource": uuid.uuid4().hex[:6],
    }
    return create("xmpp", settings)


@pytest.fixture
async def bot(xmpp_server: XmppServer) -> AsyncIterator[Bot]:  # noqa: F811
    async with Started(bot_platform(xmpp_server, xmpp_server.port)) as started:
        yield started


@pytest.fixture
async def alice(xmpp_server: XmppServer) -> AsyncIterator[XmppUser]:  # noqa: F811
    async with XmppUser(xmpp_server, "alice") as user:
        yield user


async def test_a_chat_message_and_its_answer_corrected_in_place(bot: Bot, alice: XmppUser) -> None:
    sent = alice.say(BOT, "hello bot")
    inbound = await bot.next_message()
    assert (inbound.text, inbound.sender_id) == ("hello bot", alice.jid)
    assert inbound.message_id == f"{alice.jid}/{sent}"
    assert inbound.is_direct and inbound.chat.chat_id == alice.jid

    await bot.platform.typing(inbound.chat)
    await alice.wait_for(lambda: "composing" in alice.states)
    answer = await bot.platform.send(inbound.chat, "thinking", key="turn1/0")
    await bot.platform.edit(inbound.chat, answer, "the answer is 42")
    shown = await alice.wait_for(lambda: [m for m in alice.received if m.edits])
    assert [(m.id, m.body, m.edits) for m in shown] == [(answer, "the answer is 42", ["thinking"])]


async def test_two_people_whose_clients_pick_the_same_id_are_both_answered(
    xmpp_server: XmppServer,  # noqa: F811
    alice: XmppUser,
    tmp_path: Path,
) -> None:
    server = ScriptedProvider([text("hello alice"), text("hello bob")])
    with server:
        async with XmppUser(xmpp_server, "bob") as bob:
            chosen = {"allow_users": [alice.jid, bob.jid], "stream": False}
            platform = bot_platform(xmpp_server, xmpp_server.port)
            async with running_gateway(server, tmp_path, platform=platform, settings=chosen):
                alice.say(BOT, "hi from alice", message_id="m1")
                await alice.wait_for(lambda: [m for m in alice.received if m.body == "hello alice"])
                bob.say(BOT, "hi from bob", message_id="m1")
                await bob.wait_for(lambda: [m for m in bob.received if m.body == "hello bob"])


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


async def test_after_the_server_drops_the_bot_it_reconnects_and_sends_what_waited_once(
    xmpp_server: XmppServer,  # noqa: F811
    alice: XmppUser,
    tmp_path: Path,
) -> None:
    def shown() -> list[str]:
        return [m.body for m in alice.received if m.sender.startswith(BOT)]

    gate = Gate()
    server = ScriptedProvider([text("before"), gate.hold(text("while away")), text("after")])
    with server, TcpProxy(xmpp_server.port) as proxy:
        platform = bot_platform(xmpp_server, proxy.port)
        chosen = {"allow_users": [alice.jid], "stream": False}
        async with running_gateway(server, tmp_path, platform=platform, settings=chosen) as gw:
            alice.say(BOT, "one")
            await alice.wait_for(lambda: "before" in shown())
            alice.say(BOT, "two")
            await gw.until(lambda: len(server.requests) == 2)
            proxy.refusing = True  # the server is down for a while: it refuses the bot
            proxy.drop()
            gate.open()  # the answer is ready while the bot is away
            await proxy.until(lambda: proxy.connections >= 3)
            proxy.refusing = False
            await alice.wait_for(lambda: "while away" in shown())
            alice.say(BOT, "three")
            await alice.wait_for(lambda: "after" in shown())
            await asyncio.sleep(0.2)  # a repeated message would have come by now
    assert shown() == ["before", "while away", "after"]  # once each, not marked
