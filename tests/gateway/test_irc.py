"""The gateway on IRC: the `irc` library's asyncio client against a real ngIRCd on loopback,
people talking to it from plain IRC connections, the model scripted."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from gateway_process import GatewayProcess
from irc_server import IrcServer, IrcUser, irc_server  # noqa: F401 - the fixture
from tcp_proxy import TcpProxy

from gateway_support import TERMINAL, Gate, Harness, removal_asked, running_gateway
from helpers import FOREVER
from talaria.gateway.delivery import REPEAT_MARK
from talaria.gateway.irc import LINE_BYTES, IrcPlatform, irc_lines
from talaria.testing import ScriptedProvider, call, calls, text

BOT, CHANNEL = "talaria", "#talaria"
pytestmark = pytest.mark.ngircd


@asynccontextmanager
async def irc_gateway(
    server: ScriptedProvider, home: Path, irc: IrcServer, **kwargs: Any
) -> AsyncIterator[Harness]:
    options = {"server": "127.0.0.1", "port": irc.port, "nick": _nick(home),
               "channels": [CHANNEL], **kwargs.pop("options", {})}  # fmt: skip
    chosen = {"allow_users": ["alice"], **kwargs.pop("settings", {})}
    platform = IrcPlatform("irc", options)
    async with running_gateway(server, home, platform=platform, settings=chosen, **kwargs) as gw:
        yield gw


def _nick(home: Path) -> str:
    return f"{BOT}{home.name[-6:].replace('_', '')}"


def _bot(gw: Harness) -> str:
    return str(gw.platform.nick)


async def test_a_private_message_gets_one_answer_line_by_line(
    tmp_path: Path,
    irc_server: IrcServer,  # noqa: F811
) -> None:
    server = ScriptedProvider([text("First line.\n\nSecond line.")])
    with server:
        async with (
            irc_gateway(server, tmp_path, irc_server) as gw,
            IrcUser("alice", irc_server.port) as alice,
        ):
            alice.say(_bot(gw), "hi")
            await alice.until(lambda: "Second line." in alice.texts())
    assert alice.texts() == ["First line.", "Second line."]


async def test_a_tool_turn_in_a_channel_shows_a_line_per_tool(
    tmp_path: Path,
    irc_server: IrcServer,  # noqa: F811
) -> None:
    server = ScriptedProvider([calls(("add", {"a": 3, "b": 4})), text("Seven.")])
    with server:
        async with (
            irc_gateway(server, tmp_path, irc_server) as gw,
            IrcUser("alice", irc_server.port) as alice,
        ):
            await alice.join(CHANNEL, _bot(gw))
            alice.say(CHANNEL, "just chatting")
            alice.say(CHANNEL, f"{_bot(gw)}: add 3 and 4")
            await alice.until(lambda: "Seven." in alice.texts(CHANNEL))
    assert alice.texts(CHANNEL) == ["✓ add → 7", "Seven."]
    assert server.requests[0].body["messages"][-1]["content"] == "add 3 and 4"


async def test_an_approval_is_answered_with_a_command(
    tmp_path: Path,
    irc_server: IrcServer,  # noqa: F811
) -> None:
    doomed = tmp_path / "doomed"
    doomed.mkdir()
    server = ScriptedProvider([calls(("terminal", {"command": f"rm -rf {doomed}"})), text("Done.")])
    agent = {"toolsets": ["terminal"], "tools": []}
    with server:
        async with (
            irc_gateway(server, tmp_path, irc_server, agent=agent) as gw,
            IrcUser("alice", irc_server.port) as alice,
        ):
            alice.say(_bot(gw), "remove it")
            await alice.until(lambda: any("/approve 1" in t for t in alice.texts()))
            alice.say(_bot(gw), "!approve 1")
            await alice.until(lambda: "Done." in alice.texts())
    assert not doomed.exists() and "Request 1 approved." in alice.texts()


async def test_a_denied_approval_runs_nothing_and_the_chat_says_so(
    tmp_path: Path,
    irc_server: IrcServer,  # noqa: F811
) -> None:
    kept, server = removal_asked(tmp_path, "I left it alone.")
    with server:
        async with (
            irc_gateway(server, tmp_path, irc_server, agent=TERMINAL) as gw,
            IrcUser("alice", irc_server.port) as alice,
        ):
            alice.say(_bot(gw), "remove it")
            await alice.until(lambda: any("/deny 1" in t for t in alice.texts()))
            alice.say(_bot(gw), "!deny 1")
            await alice.until(lambda: "I left it alone." in alice.texts())
    assert kept.exists() and "Request 1 denied." in alice.texts()
    assert any(t.startswith("✗ terminal") and "Denied by the user" in t for t in alice.texts())


async def test_a_stranger_gets_nothing(
    tmp_path: Path,
    irc_server: IrcServer,  # noqa: F811
) -> None:
    server = ScriptedProvider([text("for alice")])
    with server:
        async with (
            irc_gateway(server, tmp_path, irc_server, settings={"pairing": False}) as gw,
            IrcUser("mallory", irc_server.port) as mallory,
            IrcUser("alice", irc_server.port) as alice,
        ):
            await mallory.join(CHANNEL, _bot(gw))
            mallory.say(CHANNEL, f"{_bot(gw)}: hello")
            mallory.say(_bot(gw), "hello?")
            alice.say(_bot(gw), "hi")
            await alice.until(lambda: "for alice" in alice.texts())
            await gw.until(lambda: not gw.store.ledger_unfinished_inbound("irc"))
    assert mallory.texts() == [] and len(server.requests) == 1


async def test_stop_ends_the_turn_and_a_queued_message_waits_its_turn(
    tmp_path: Path,
    irc_server: IrcServer,  # noqa: F811
) -> None:
    gate = Gate()
    server = ScriptedProvider([text("never", delay=FOREVER), gate.hold(text("later")), text("2")])
    with server:
        async with (
            irc_gateway(server, tmp_path, irc_server) as gw,
            IrcUser("alice", irc_server.port) as alice,
        ):
            alice.say(_bot(gw), "slow")
            await alice.until(lambda: server.requests)
            alice.say(_bot(gw), "!stop")
            await alice.until(lambda: "Stopped." in alice.texts())
            alice.say(_bot(gw), "one")
            await alice.until(lambda: len(server.requests) == 2)
            alice.say(_bot(gw), "two")
            await alice.until(lambda: any(t.startswith("Queued") for t in alice.texts()))
            gate.open()
            await alice.until(lambda: "2" in alice.texts())
            await asyncio.sleep(0.2)
    texts = alice.texts()
    assert "never" not in texts
    assert (
        texts.index("Queued: I will answer this when the current task is done.")
        < (texts.index("later"))
        < texts.index("2")
    )


async def test_a_file_the_answer_names_is_not_sent_and_the_chat_says_why(
    tmp_path: Path,
    irc_server: IrcServer,  # noqa: F811
) -> None:
    folder = tmp_path / "chat-files" / "irc-alice"
    folder.mkdir(parents=True)
    (folder / "report.txt").write_text("the report")
    server = ScriptedProvider([text("Here it is.\nMEDIA:report.txt")])
    with server:
        async with (
            irc_gateway(server, tmp_path, irc_server) as gw,
            IrcUser("alice", irc_server.port) as alice,
        ):
            alice.say(_bot(gw), "send me the report")
            await alice.until(lambda: len(alice.texts()) == 2)
    assert alice.texts() == [
        "Here it is.",
        "report.txt was not sent: this chat platform cannot carry files from the bot.",
    ]


@pytest.mark.parametrize(
    ("mode", "ack", "answers"),
    [("interrupt", "Stopping", ["two"]), ("steer", "Noted", ["one"])],
)
async def test_a_busy_chat_interrupts_or_steers(
    tmp_path: Path,
    irc_server: IrcServer,  # noqa: F811
    mode: str,
    ack: str,
    answers: list[str],
) -> None:
    gate = Gate()
    first = text("one", delay=FOREVER)  # interrupted: it never answers
    if mode == "steer":
        first = gate.hold(call("add", {"a": 1, "b": 1}))
    server = ScriptedProvider([first, text("one" if mode == "steer" else "two")])
    with server:
        async with (
            irc_gateway(server, tmp_path, irc_server, settings={"busy": mode}) as gw,
            IrcUser("alice", irc_server.port) as alice,
        ):
            alice.say(_bot(gw), "first")
            await alice.until(lambda: server.requests)
            alice.say(_bot(gw), "second")
            await alice.until(lambda: any(t.startswith(ack) for t in alice.texts()))
            gate.open()
            await alice.until(lambda: answers[-1] in alice.texts())
            await asyncio.sleep(0.2)  # a stale reply would have been sent by now
    assert [t for t in alice.texts() if t in ("one", "two")] == answers
    if mode == "steer":  # one turn, whose next model call saw the second message
        assert "second" in str(server.requests[1].body["messages"]) and len(server.requests) == 2


async def test_kill_9_between_the_answer_and_the_send_delivers_it_once_after_restart(
    tmp_path: Path,
    irc_server: IrcServer,  # noqa: F811
) -> None:
    nick = _nick(tmp_path)
    server = ScriptedProvider([text("the one answer")])
    with server, TcpProxy(irc_server.port) as proxy:
        settings = {"server": "127.0.0.1", "port": proxy.port, "nick": nick,
                    "channels": [CHANNEL], "allow_users": ["alice"]}  # fmt: skip
        async with IrcUser("alice", irc_server.port) as alice:
            with GatewayProcess(tmp_path / "home", server, "irc", settings) as gateway:
                await alice.join(CHANNEL, nick)
                proxy.hold(b"PRIVMSG alice ")  # the answer never reaches the server
                alice.say(nick, "hi")
                await proxy.until(lambda: proxy.held)
                gateway.kill()
                proxy.hold(b"")
                gateway.start()
                await alice.until(lambda: "the one answer" in alice.texts())
            await asyncio.sleep(0.2)  # a repeated line would have come by now
    assert alice.texts() == [REPEAT_MARK.strip(), "the one answer"]  # IRC cannot tell: marked
    assert len(server.requests) == 1  # the model was not asked again


async def test_after_the_server_drops_the_bot_it_reconnects_and_sends_what_waited_once(
    tmp_path: Path,
    irc_server: IrcServer,  # noqa: F811
) -> None:
    gate = Gate()
    server = ScriptedProvider([text("before"), gate.hold(text("while away")), text("after")])
    with server, TcpProxy(irc_server.port) as proxy:
        async with (
            irc_gateway(server, tmp_path, irc_server, options={"port": proxy.port}) as gw,
            IrcUser("alice", irc_server.port) as alice,
        ):
            bot = _bot(gw)
            await alice.join(CHANNEL, bot)
            alice.say(bot, "one")
            await alice.until(lambda: "before" in alice.texts())
            alice.say(bot, "two")
            await alice.until(lambda: len(server.requests) == 2)
            joined = alice.joins.count(bot)
            proxy.refusing = True  # the server is down for a while: it refuses the bot
            proxy.drop()
            gate.open()  # the answer is ready while the bot is away
            await proxy.until(lambda: proxy.connections >= 3)
            proxy.refusing = False
            await alice.until(lambda: alice.joins.count(bot) > joined)  # back in the channel
            await alice.until(lambda: "while away" in alice.texts())
            alice.say(bot, "three")
            await alice.until(lambda: "after" in alice.texts())
            await asyncio.sleep(0.2)  # a repeated line would have come by now
    assert alice.texts() == ["before", "while away", "after"]  # once each, not marked


async def test_a_nick_held_by_another_connection_is_taken_back_once_free(
    tmp_path: Path,
    irc_server: IrcServer,  # noqa: F811
) -> None:
    server = ScriptedProvider([text("back as myself")])
    with server, TcpProxy(irc_server.port) as proxy:
        async with (
            irc_gateway(
                server, tmp_path, irc_server, options={"port": proxy.port, "nick_retry_s": 0.5}
            ) as gw,
            IrcUser("alice", irc_server.port) as alice,
        ):
            bot = _bot(gw)
            await alice.join(CHANNEL, bot)
            proxy.refusing = True
            proxy.drop()
            async with IrcUser(bot, irc_server.port):  # someone takes the nick meanwhile
                proxy.refusing = False
                await alice.until(lambda: f"{bot}_" in alice.joins)  # back, under another nick
            await alice.until(lambda: (f"{bot}_", bot) in alice.renames)  # its own again
            alice.say(bot, "hi")
            await alice.until(lambda: "back as myself" in alice.texts())


def test_long_lines_are_cut_within_the_protocol_limit() -> None:
    lines = irc_lines("é" * 500 + "\n\nshort")
    assert all(len(line.encode()) <= LINE_BYTES for line in lines)
    assert "".join(lines[:-1]) == "é" * 500 and lines[-1] == "short"


async def test_over_tls_the_bot_checks_the_server_certificate(
    tmp_path: Path,
    irc_server: IrcServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    options = {"server": "127.0.0.1", "port": irc_server.tls_port, "tls": True,
               "nick": _nick(tmp_path), "channels": [CHANNEL]}  # fmt: skip
    with pytest.raises(ssl.SSLCertVerificationError):  # a certificate nobody vouched for
        await IrcPlatform("irc", options).start(lambda update: asyncio.sleep(0))
    monkeypatch.setenv("SSL_CERT_FILE", str(irc_server.cert))  # now trusted
    server = ScriptedProvider([text("Over TLS.")])
    with server:
        async with (
            running_gateway(server, tmp_path, platform=IrcPlatform("irc", options),
                            settings={"allow_users": ["alice"]}) as gw,
            IrcUser("alice", irc_server.port) as alice,
        ):  # fmt: skip
            alice.say(_bot(gw), "hi")
            await alice.until(lambda: "Over TLS." in alice.texts())
