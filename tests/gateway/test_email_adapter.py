"""The email adapter against a real Dovecot (IMAP) and SMTP server: what lands in a person's
mailbox when the bot answers, and what the bot receives of their mail."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from live_platforms import LiveMail, MailPerson, until_shown
from mail_server import MailServer, mail_server  # noqa: F401
from started_adapter import WAIT_S, Started

from gateway_support import running_gateway
from talaria.gateway.email import EmailPlatform, create
from talaria.testing import ScriptedProvider, text

pytestmark = pytest.mark.dovecot


Bot = Started[EmailPlatform]


def unique(name: str) -> str:
    return f"{name}{uuid.uuid4().hex[:8]}"


def settings(server: MailServer, address: str) -> dict[str, object]:
    return {
        "address": address,
        "password": server.passwords[address],
        "imap_host": "127.0.0.1",
        "imap_port": server.imap_port,
        "imap_tls": False,
        "smtp_port": server.smtp_port,
        "smtp_security": "none",
    }


@pytest.fixture
async def bot(mail_server: MailServer) -> AsyncIterator[Bot]:  # noqa: F811
    address = mail_server.add_user(unique("bot"))
    async with Started(create("email", settings(mail_server, address))) as started:
        yield started


def mail(sender: str, to: str, subject: str, body: str, **headers: str) -> EmailMessage:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = sender, to, subject
    message["Message-ID"] = f"<{uuid.uuid4().hex}@example.test>"
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    message.set_content(body)
    return message


async def inbox_of(server: MailServer, address: str, count: int) -> list[EmailMessage]:
    for _ in range(int(WAIT_S * 10)):
        found = await asyncio.to_thread(server.inbox, address)
        if len(found) >= count:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"{address} has {len(found)} messages, not {count}")


async def test_a_mail_and_its_answer_in_the_same_thread(bot: Bot, mail_server: MailServer) -> None:  # noqa: F811
    alice = mail_server.add_user(unique("alice"))
    me = bot.platform.settings.address
    first = mail(alice, me, "The build", "Why does the build fail?\n\n-- \nAlice")
    mail_server.send(first)
    inbound = await bot.next_message()
    assert (inbound.text, inbound.sender_id, inbound.is_direct) == (
        "Why does the build fail?", alice, True)  # fmt: skip
    assert inbound.message_id == first["Message-ID"]
    assert inbound.chat.chat_id == alice and inbound.chat.thread_id == first["Message-ID"]

    answer_id = await bot.platform.send(
        inbound.chat, "A missing import.", key="turn1/0", reply_to=inbound.message_id
    )
    (answer,) = await inbox_of(mail_server, alice, 1)
    assert answer["Message-ID"] == answer_id and answer["Subject"] == "Re: The build"
    assert answer["In-Reply-To"] == first["Message-ID"]
    assert answer["Auto-Submitted"] == "auto-replied"
    assert answer.get_content().strip() == "A missing import."

    quoted = "Which one?\n\nOn Tue, the bot wrote:\n> A missing import."
    references = f"{first['Message-ID']} {answer_id}"
    follow = mail(alice, me, "Re: The build", quoted, In_Reply_To=answer_id, References=references)
    mail_server.send(follow)
    second = await bot.next_message()
    assert second.text == "Which one?" and second.reply_to_bot
    assert second.chat == inbound.chat  # the same thread: the same session


async def test_handled_mail_is_not_delivered_again_but_unhandled_mail_is(
    mail_server: MailServer,  # noqa: F811
) -> None:
    address = mail_server.add_user(unique("bot"))
    alice = mail_server.add_user(unique("alice"))
    async with Started(create("email", settings(mail_server, address))) as first:
        mail_server.send(mail(alice, address, "one", "first"))
        assert (await first.next_message()).text == "first"

    mail_server.send(mail(alice, address, "two", "second, while the bot was down"))
    async with Started(create("email", settings(mail_server, address))) as restarted:
        assert (await restarted.next_message()).text == "second, while the bot was down"
        mail_server.send(mail(alice, address, "three", "third"))
        assert (await restarted.next_message()).text == "third"


async def test_automatic_mail_is_never_answered(bot: Bot, mail_server: MailServer) -> None:  # noqa: F811
    other = mail_server.add_user(unique("otherbot"))
    me = bot.platform.settings.address
    mail_server.send(mail(other, me, "Out of office", "I am away", Auto_Submitted="auto-replied"))
    mail_server.send(mail(other, me, "News", "a list", Precedence="bulk"))
    mail_server.send(mail(other, me, "Hi", "a person"))
    assert (await bot.next_message()).text == "a person"
    assert bot.updates.empty()


async def test_a_burst_of_mail_is_answered_in_arrival_order(
    mail_server: MailServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The turns run in the order the mails came, and each answer replies to its own mail.
    (The order of the answers in the person's mailbox is the mail server's: Dovecot numbers
    mails by their maildir file names, which once put two answers of one second the other
    way round.)"""
    live = LiveMail(mail_server)
    bot = live.bot()
    alice = await live.person("alice", bot)
    assert isinstance(alice, MailPerson)
    said = [f"message {n}" for n in range(1, 6)]
    for line in said:  # all in the mailbox before the gateway looks: one burst
        await alice.say(line)
    asked: list[str] = []

    def echo(body: dict[str, Any]) -> Any:
        asked.append([m["content"] for m in body["messages"] if m["role"] == "user"][-1].strip())
        return text(f"re: {asked[-1]}")

    with ScriptedProvider([echo] * len(said)) as server:
        async with running_gateway(
            server, tmp_path, platform=bot, settings={"allow_users": [alice.user_id]}
        ):
            await until_shown(alice, lambda s: len(answers(s)) == len(said))
    assert asked == said  # the turns ran in the order the mails came
    replied = {text: to for to, text in await alice.replies() if text.startswith("re: ")}
    assert [replied[f"re: {line}"] for line in said] == alice.sent  # each to its own mail


def answers(shown: list[str]) -> list[str]:
    return [m for m in shown if m.startswith("re: ")]
