"""The Matrix adapter against a real Synapse: what a person in a Matrix client sees of the
bot's messages, edits and choices, and what the bot receives of theirs."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from matrix_server import MatrixUser, Synapse, synapse  # noqa: F401
from started_adapter import Started

from talaria.gateway.matrix import CHOICES, MatrixPlatform, create
from talaria.gateway.platform import Button, ButtonPress, Inbound

pytestmark = pytest.mark.synapse


Bot = Started[MatrixPlatform]


def unique(name: str) -> str:
    return f"{name}{uuid.uuid4().hex[:8]}"


def bot_platform(server: Synapse, **extra: object) -> MatrixPlatform:
    name = unique("bot")
    settings = {
        "homeserver": server.url,
        "user_id": server.user_id(name),
        "access_token": server.register(name),
        "sync_timeout_ms": 1000,
        **extra,
    }
    return create("matrix", settings)


@pytest.fixture
async def bot(synapse: Synapse) -> AsyncIterator[Bot]:  # noqa: F811
    async with Started(bot_platform(synapse)) as started:
        yield started


@pytest.fixture
async def alice(synapse: Synapse) -> AsyncIterator[MatrixUser]:  # noqa: F811
    async with MatrixUser(synapse, unique("alice")) as user:
        yield user


async def test_a_direct_message_and_its_answer_edited_in_place(bot: Bot, alice: MatrixUser) -> None:
    room = await alice.create_room(invite=[bot.platform.settings.user_id], direct=True)
    sent = await alice.say(room, "hello bot")
    inbound = await bot.next()
    assert isinstance(inbound, Inbound)
    assert (inbound.text, inbound.sender_id, inbound.message_id) == (
        "hello bot",
        alice.user_id,
        sent,
    )
    assert inbound.is_direct and inbound.chat.chat_id == room and inbound.chat.thread_id is None

    answer = await bot.platform.send(inbound.chat, "thinking", key="turn1/0", reply_to=sent)
    again = await bot.platform.send(inbound.chat, "thinking", key="turn1/0", reply_to=sent)
    assert again == answer  # the same transaction id: the homeserver keeps one event
    await bot.platform.edit(inbound.chat, answer, "the answer is 42")
    shown = await alice.wait_for(
        lambda: [m for m in alice.messages(room, bot.platform.settings.user_id) if m.edits]
    )
    assert [(m.body, m.edits) for m in shown] == [("the answer is 42", ["thinking"])]
    assert shown[0].content["m.relates_to"]["m.in_reply_to"]["event_id"] == sent


async def test_a_question_is_answered_by_reaction_or_by_reply(bot: Bot, alice: MatrixUser) -> None:
    room = await alice.create_room(invite=[bot.platform.settings.user_id], direct=True)
    await alice.say(room, "run it")
    chat = (await bot.next()).chat
    choices = [Button("Approve once", "approve:r1"), Button("Deny", "deny:r1")]
    question = await bot.platform.send(chat, "Run `make test`?", key="q1", buttons=choices)

    shown = await alice.wait_for(
        lambda: [
            m for m in alice.messages(room) if m.event_id == question and len(m.reactions) == 2
        ]
    )
    assert shown[0].reactions == list(CHOICES[:2])
    assert "1️⃣ Approve once" in shown[0].body and "2️⃣ Deny" in shown[0].body

    await alice.react(room, question, CHOICES[1])
    press = await bot.next()
    assert isinstance(press, ButtonPress)
    assert (press.value, press.sender_id, press.message_id) == ("deny:r1", alice.user_id, question)

    reply = {"m.relates_to": {"m.in_reply_to": {"event_id": question}}}
    await alice.say(room, "> <@bot> Run `make test`?\n\napprove once", **reply)
    press = await bot.next()
    assert isinstance(press, ButtonPress) and press.value == "approve:r1"

    await bot.platform.edit(chat, question, "Run `make test`? (withdrawn)")
    await alice.react(room, question, CHOICES[0])
    await alice.say(room, "after")
    after = await bot.next()  # the reaction to a withdrawn question is no press
    assert isinstance(after, Inbound) and after.text == "after"


async def test_group_rooms_tell_mentions_replies_and_threads(
    bot: Bot,
    alice: MatrixUser,
    synapse: Synapse,  # noqa: F811
) -> None:
    me = bot.platform.settings.user_id
    async with MatrixUser(synapse, unique("bob")) as bob:
        room = await alice.create_room(invite=[me, bob.user_id])
        await bob.join(room)
        await alice.say(room, "just chatting")
        chatting = await bot.next()
        assert isinstance(chatting, Inbound)
        assert not (chatting.is_direct or chatting.mentioned or chatting.reply_to_bot)

        await bob.say(room, f"{me}: what is 2+2?", **{"m.mentions": {"user_ids": [me]}})
        asked = await bot.next()
        assert isinstance(asked, Inbound) and asked.mentioned and asked.sender_id == bob.user_id

        answer = await bot.platform.send(asked.chat, "4", key="a1", reply_to=asked.message_id)
        follow = {"m.relates_to": {"m.in_reply_to": {"event_id": answer}}}
        await bob.say(room, "> <bot> 4\n\nand 3+3?", **follow)
        replied = await bot.next()
        assert isinstance(replied, Inbound) and replied.reply_to_bot
        assert replied.text == "and 3+3?"

        thread = {"m.relates_to": {"rel_type": "m.thread", "event_id": asked.message_id}}
        await alice.say(room, f"{me}: in a thread", **thread)
        threaded = await bot.next()
        assert isinstance(threaded, Inbound) and threaded.chat.thread_id == asked.message_id
        await bot.platform.send(threaded.chat, "threaded answer", key="t1")
        shown = await alice.wait_for(
            lambda: [m for m in alice.messages(room, me) if m.body == "threaded answer"]
        )
        assert shown[0].content["m.relates_to"]["rel_type"] == "m.thread"
        assert shown[0].content["m.relates_to"]["event_id"] == asked.message_id


async def test_messages_sent_while_the_bot_was_down_arrive_at_start(
    synapse: Synapse,  # noqa: F811
    alice: MatrixUser,
) -> None:
    platform = bot_platform(synapse)
    room = await alice.create_room(invite=[platform.settings.user_id], direct=True)
    async with Started(platform) as first:
        await alice.say(room, "before the restart")
        await first.next_message()

    sent = await alice.say(room, "while it was down")
    async with Started(create("matrix", {**vars_of(platform), "catch_up_s": 600})) as restarted:
        # the earlier message may come again: the gateway de-duplicates it by its event id
        seen = [await restarted.next_message()]
        while seen[-1].message_id != sent:
            seen.append(await restarted.next_message())


def vars_of(platform: MatrixPlatform) -> dict[str, object]:
    s = platform.settings
    return {"homeserver": s.homeserver, "user_id": s.user_id, "access_token": s.access_token,
            "device_id": s.device_id, "sync_timeout_ms": s.sync_timeout_ms}  # fmt: skip
