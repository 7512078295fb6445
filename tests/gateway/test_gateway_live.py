"""`talaria gateway` through real chat servers, as the people in the chat see it: Matrix on
Synapse, email on Dovecot and SMTP, XMPP on Prosody, each person with a real client, the
model scripted. The same conversation on each platform, shown the way that platform can:
edited in place on Matrix (m.replace) and XMPP (corrections), follow-up mails by email."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from gateway_process import GatewayProcess
from live_platforms import (
    Live,
    LiveMail,
    LiveMatrix,
    LiveXmpp,
    Person,
    SendsFiles,
    ShowsTyping,
    until_files,
    until_shown,
    until_typing,
)
from mail_server import mail_server  # noqa: F401
from matrix_server import synapse  # noqa: F401
from tcp_proxy import TcpProxy
from xmpp_server import xmpp_server  # noqa: F401

from gateway_support import running_gateway
from helpers import FOREVER
from talaria import tool
from talaria.gateway import files
from talaria.gateway.core import load_platform
from talaria.gateway.delivery import REPEAT_MARK
from talaria.gateway.platform import Platform
from talaria.gateway.settings import platform_settings
from talaria.store.sqlite import SQLiteSessionStore
from talaria.testing import ScriptedProvider, call, calls, text

PLATFORMS = [
    pytest.param("matrix", marks=pytest.mark.synapse),
    pytest.param("email", marks=pytest.mark.dovecot),
    pytest.param("xmpp", marks=pytest.mark.prosody),
]
SERVERS = {"matrix": ("synapse", LiveMatrix), "email": ("mail_server", LiveMail),
           "xmpp": ("xmpp_server", LiveXmpp)}  # fmt: skip
QUEUED = "Queued: I will answer this when the current task is done."

RELEASE = threading.Event()
"""Set by a test to let a turn's `hold` tool call return."""


@tool
def hold() -> str:
    """Wait until the test lets the turn go on."""
    RELEASE.wait(120)
    return "released"


@pytest.fixture(params=PLATFORMS)
def live(request: pytest.FixtureRequest) -> Iterator[Live]:
    fixture, kind = SERVERS[request.param]
    RELEASE.clear()
    yield kind(request.getfixturevalue(fixture))
    RELEASE.set()  # a turn still holding lets go


@asynccontextmanager
async def gateway(
    server: ScriptedProvider,
    home: Path,
    bot: Platform,
    allowed: list[Person],
    *,
    agent: dict[str, Any] | None = None,
    **settings: Any,
) -> AsyncIterator[Any]:
    allow = {"allow_users": [person.user_id for person in allowed], **settings}
    store = SQLiteSessionStore(home / "state.db")
    async with running_gateway(
        server, home, platform=bot, settings=allow, agent=agent, store=store
    ) as harness:
        yield harness


async def test_a_message_gets_one_answer(live: Live, tmp_path: Path) -> None:
    bot = live.bot()
    alice = await live.person("alice", bot)
    with ScriptedProvider([text("Hello Alice, how can I help?")]) as server:
        async with gateway(server, tmp_path, bot, [alice]):
            await alice.say("hi")
            shown = await until_shown(alice, lambda s: "Hello Alice, how can I help?" in s)
    assert shown == ["Hello Alice, how can I help?"]
    await alice.close()


@pytest.mark.parametrize("live", [p for p in PLATFORMS if p.values[0] != "email"], indirect=True)
async def test_the_bot_is_typing_while_it_works_and_not_after_its_answer(
    live: Live, tmp_path: Path
) -> None:
    bot = live.bot()
    alice = await live.person("alice", bot)
    assert isinstance(alice, ShowsTyping)
    with ScriptedProvider([call("hold", {}), text("Done.")]) as server:
        async with gateway(server, tmp_path, bot, [alice], agent={"tools": [hold]}):
            await alice.say("take your time")
            await until_typing(alice)
            RELEASE.set()
            await until_shown(alice, lambda s: "Done." in s)
            # the notice ending it went out before the answer: the client has it by now
            assert not await alice.typing()
    await alice.close()


async def test_a_tool_turn_shows_its_progress(live: Live, tmp_path: Path) -> None:
    bot = live.bot()
    alice = await live.person("alice", bot)
    with ScriptedProvider([calls(("add", {"a": 2, "b": 3})), text("It is 5.")]) as server:
        async with gateway(server, tmp_path, bot, [alice]):
            await alice.say("what is 2+3?")
            shown = await until_shown(alice, lambda s: "It is 5." in s)
    if live.kind == "email":
        # Two mails of one turn, sent one after the other: the mailbox's order (IMAP sequence)
        # once put the second first in CI while this test polled the mailbox; a mail client
        # sorts by the Date header, which both share to the second.
        shown = sorted(shown, key=lambda line: line != "✓ add → 5")
    assert shown == ["✓ add → 5", "It is 5."]  # edited in place, or a follow-up mail
    await alice.close()


@pytest.mark.parametrize("allowed", [True, False], ids=["approved", "denied"])
async def test_an_approval_is_answered_in_the_chat(
    live: Live, tmp_path: Path, allowed: bool
) -> None:
    target = tmp_path / "target"
    target.mkdir()
    bot = live.bot()
    alice = await live.person("alice", bot)
    script = [calls(("terminal", {"command": f"rm -rf {target}"})), text("Done.")]
    agent = {"toolsets": ["terminal"], "tools": []}
    with ScriptedProvider(script) as server:
        async with gateway(server, tmp_path, bot, [alice], agent=agent):
            await alice.say("remove the target folder")
            await until_shown(alice, lambda s: any("Request 1" in m for m in s))
            if allowed:
                await alice.choose("Request 1", 0, "/approve 1")
            else:
                await alice.choose("Request 1", 2, "/deny 1")
            await until_shown(alice, lambda s: "Done." in s)
    assert target.exists() is not allowed
    await alice.close()


async def test_a_stranger_reaches_no_model_until_paired(live: Live, tmp_path: Path) -> None:
    bot = live.bot()
    alice = await live.person("alice", bot)
    mallory = await live.person("mallory", bot)
    with ScriptedProvider([text("Welcome.")]) as server:
        async with gateway(server, tmp_path, bot, [alice]) as gw:
            await mallory.say("let me in")
            shown = await until_shown(mallory, lambda s: any("gateway pair" in m for m in s))
            assert len(shown) == 1 and server.requests == []
            code = shown[0].rsplit(" ", 1)[-1].strip(".`")
            approved = gw.store.ledger_approve_pairing(code, ttl=3600)
            assert approved == (live.kind, mallory.user_id)
            await mallory.say("now?")
            await until_shown(mallory, lambda s: "Welcome." in s)
    assert len(server.requests) == 1
    await alice.close()
    await mallory.close()


async def test_stop_ends_a_running_turn_and_its_answer_never_comes(
    live: Live, tmp_path: Path
) -> None:
    bot = live.bot()
    alice = await live.person("alice", bot)
    with ScriptedProvider([text("too late", delay=FOREVER), text("fresh")]) as server:
        async with gateway(server, tmp_path, bot, [alice]) as gw:
            await alice.say("a slow question")
            await gw.until(lambda: len(server.requests) == 1)
            await alice.say("/stop")
            await until_shown(alice, lambda s: "Stopped." in s)
            await gw.until(lambda: no_turn_running(gw.gateway))
            await alice.say("again")
            shown = await until_shown(alice, lambda s: "fresh" in s)
    assert "too late" not in shown
    await alice.close()


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


async def test_files_the_answer_names_are_sent_back(live: Live, tmp_path: Path) -> None:
    bot = live.bot()
    alice = await live.person("alice", bot)
    answer = "Here is the report.\nMEDIA:report.txt\nMEDIA:chart.png"
    with ScriptedProvider([call("hold", {}), text(answer)]) as server:
        async with gateway(server, tmp_path, bot, [alice], agent={"tools": [hold]}) as gw:
            await alice.say("send me the report")
            await gw.until(lambda: len(server.requests) == 1)
            (chat,) = gw.gateway.connected[live.kind].chats
            folder = files.chat_folder(tmp_path, chat)  # the agent's working directory's
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "report.txt").write_bytes(b"the report")
            (folder / "chart.png").write_bytes(PNG)
            RELEASE.set()
            sent = await until_files(alice, 2)
            shown = await until_shown(alice, lambda s: "Here is the report." in s)
    assert sent == [("report.txt", b"the report"), ("chart.png", PNG)]
    assert "Here is the report." in shown and not any("MEDIA:" in m for m in shown)
    await alice.close()


async def test_a_file_sent_to_the_bot_is_saved_in_the_chat_folder(
    live: Live, tmp_path: Path
) -> None:
    bot = live.bot()
    alice = await live.person("alice", bot)
    assert isinstance(alice, SendsFiles)
    with ScriptedProvider([text("Read it.")]) as server:
        async with gateway(server, tmp_path, bot, [alice]) as gw:
            await alice.send_file("notes.txt", b"remember the milk")
            await until_shown(alice, lambda s: "Read it." in s)
            (chat,) = gw.gateway.connected[live.kind].chats
    saved = files.chat_folder(tmp_path, chat) / "notes.txt"
    assert saved.read_bytes() == b"remember the milk"
    assert str(saved) in server.requests[0].body["messages"][-1]["content"]
    await alice.close()


def no_turn_running(gateway: Any) -> bool:
    chats = [chat for conn in gateway.connected.values() for chat in conn.chats.values()]
    return all(chat.run is None or chat.run.done() for chat in chats)


SCRIPTS = {
    # the held turn answers once released, then the queued message gets its own turn
    "queue": [call("hold", {}), text("first answer"), text("second answer")],
    # the held turn stops at its tool result: the only answer left is the new message's
    "interrupt": [call("hold", {}), text("second answer")],
    # the second message joins the held turn before its next model call
    "steer": [call("hold", {}), text("first answer")],
}
ACKS = {
    "queue": QUEUED,
    "interrupt": "Stopping the current task to answer this.",
    "steer": "Noted: I am adding this to the task in progress.",
}


@pytest.mark.parametrize("busy", ["queue", "interrupt", "steer"])
async def test_a_busy_chat_queues_interrupts_or_steers(
    live: Live, tmp_path: Path, busy: str
) -> None:
    bot = live.bot()
    alice = await live.person("alice", bot)
    agent = {"tools": [hold]}
    last = SCRIPTS[busy][-1].text
    with ScriptedProvider(list(SCRIPTS[busy])) as server:
        async with gateway(server, tmp_path, bot, [alice], agent=agent, busy=busy) as gw:
            await alice.say("first")
            await gw.until(lambda: len(server.requests) == 1)
            await alice.say("second")
            await until_shown(alice, lambda s: ACKS[busy] in s)
            RELEASE.set()
            shown = await until_shown(alice, lambda s: last in s)
            await gw.until(lambda: not gw.store.ledger_unfinished_inbound(live.kind))
    answered = [m for m in shown if m.endswith("answer")]
    expected = {
        "queue": ["first answer", "second answer"],  # in order, both
        "interrupt": ["second answer"],  # the stopped turn's answer is never sent
        "steer": ["first answer"],  # one turn, which saw the second message
    }
    assert answered == expected[busy]
    if busy == "steer":
        seen = str(server.requests[-1].body["messages"])
        assert "second" in seen and len(server.requests) == 2
    await alice.close()


async def test_a_message_delivered_again_gets_one_reply(live: Live, tmp_path: Path) -> None:
    bot = live.bot()
    alice = await live.person("alice", bot)
    store_home = tmp_path
    with ScriptedProvider([text("only once"), text("and the next")]) as server:
        async with gateway(server, store_home, bot, [alice]) as gw:
            await alice.say("hi")
            await until_shown(alice, lambda s: "only once" in s)
            await gw.until(lambda: not gw.store.ledger_unfinished_inbound(live.kind))
        await alice.repeat()
        async with gateway(server, store_home, live.same_bot(bot), [alice]):
            await alice.say("and now?")
            shown = await until_shown(alice, lambda s: "and the next" in s)
    assert shown == ["only once", "and the next"]
    assert len(server.requests) == 2
    await alice.close()


async def test_kill_9_between_the_answer_and_the_send_delivers_it_once_after_restart(
    live: Live, tmp_path: Path
) -> None:
    """The answer is recorded, its send is under way and unconfirmed, and the gateway process
    is killed. Where the platform de-duplicates sends (Matrix's transaction ids) the server
    takes the send in and only its reply is lost; elsewhere the send never reaches the server
    (one that did would come again, marked as possibly repeated)."""
    settings = live.bot_settings()
    bot = load_platform(platform_settings(live.kind, settings))
    alice = await live.person("alice", bot)
    dedupes = bot.capabilities.dedupes_sends
    answer = "the one answer"
    server = ScriptedProvider([text(answer)])
    with server, TcpProxy(live.send_port) as proxy:
        proxied = {**live.through(settings, proxy.port), "allow_users": [alice.user_id],
                   "stream": False}  # fmt: skip
        with GatewayProcess(tmp_path / "home", server, live.kind, proxied) as gateway:
            await gateway.until_connected()
            proxy.hold(answer.encode(), reply=dedupes)
            await alice.say("hi")
            await proxy.until(lambda: proxy.held)
            if dedupes:  # the server has it; only its reply never came back
                await until_shown(alice, lambda s: answer in s)
            gateway.kill()
            proxy.hold(b"")
            gateway.start()
            await gateway.until_connected()
            await until_shown(alice, lambda s: any(answer in m for m in s))
            await alice.say("/help")  # answered after anything still owed
            shown = await until_shown(alice, lambda s: any("Commands:" in m for m in s))
    assert [m for m in shown if answer in m] == [answer if dedupes else REPEAT_MARK + answer]
    assert len(server.requests) == 1  # the model was not asked again
    assert SQLiteSessionStore(tmp_path / "home" / "state.db").ledger_pending(live.kind) == []
    await alice.close()
