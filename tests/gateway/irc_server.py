"""A real IRC server for the IRC gateway tests: ngIRCd (the distribution's `ngircd`) on
loopback with a config of its own, and `IrcUser`, a person in a plain IRC client (RFC 1459
lines over a socket) who talks to the bot and keeps what it said."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from chat_server import ServerProcess, free_port, require

CONFIG = """\
[Global]
Name = irc.talaria.test
Info = talaria gateway tests
Listen = 127.0.0.1
Ports = {port}
[SSL]
CertFile = {cert}
KeyFile = {key}
Ports = {tls_port}
[Limits]
MaxNickLength = 30
[Options]
PAM = no
Ident = no
DNS = no
"""
WAIT_S = 60.0


class IrcServer:
    def __init__(self) -> None:
        self.binary = require("/usr/sbin/ngircd", "the ngircd package")
        self.process = ServerProcess("ngircd")
        self.port = free_port()
        self.tls_port = free_port()
        """Where it speaks TLS, with a certificate for 127.0.0.1 that `cert` holds."""
        self.cert = self.process.directory / "cert.pem"

    def start(self) -> None:
        from talaria.testing.tls import self_signed_certificate

        cert, key = self_signed_certificate(self.process.directory)
        key.chmod(0o644)  # ngIRCd may read it as another user
        config = self.process.directory / "ngircd.conf"
        config.write_text(CONFIG.format(port=self.port, tls_port=self.tls_port, cert=cert, key=key))
        config.chmod(0o644)
        self.process.spawn([self.binary, "--nodaemon", "--config", str(config)])
        self.process.wait_listening(self.port)
        self.process.wait_listening(self.tls_port)


@pytest.fixture(scope="session")
def irc_server() -> Iterator[IrcServer]:
    server = IrcServer()
    try:
        server.start()
        yield server
    finally:
        server.process.stop()


@dataclass
class Said:
    nick: str
    target: str
    text: str


@dataclass
class IrcUser:
    nick: str
    port: int
    heard: list[Said] = field(default_factory=list)
    names: dict[str, set[str]] = field(default_factory=dict)
    joins: list[str] = field(default_factory=list)
    """The nick of each JOIN seen, in order (a bot that reconnects joins again)."""
    renames: list[tuple[str, str]] = field(default_factory=list)
    """(old nick, new nick) of each NICK change seen in a shared channel."""
    _writer: Any = None
    _task: Any = None

    async def __aenter__(self) -> IrcUser:
        reader, self._writer = await asyncio.open_connection("127.0.0.1", self.port)
        self._send(f"NICK {self.nick}")
        self._send(f"USER {self.nick} 0 * :{self.nick}")
        welcomed = asyncio.Event()
        self._task = asyncio.create_task(self._read(reader, welcomed))
        await asyncio.wait_for(welcomed.wait(), WAIT_S)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._send("QUIT :bye")
        self._task.cancel()
        self._writer.close()

    def _send(self, line: str) -> None:
        self._writer.write(line.encode() + b"\r\n")

    async def _read(self, reader: asyncio.StreamReader, welcomed: asyncio.Event) -> None:
        while line := (await reader.readline()).decode(errors="replace").rstrip("\r\n"):
            prefix, _, rest = line[1:].partition(" ") if line.startswith(":") else ("", "", line)
            words = rest.split(" ")
            nick = prefix.split("!", 1)[0]
            if words[0] == "PING":
                self._send("PONG " + " ".join(words[1:]))
            elif words[0] == "001":
                welcomed.set()
            elif words[0] == "PRIVMSG":
                self.heard.append(Said(nick, words[1], rest.split(" :", 1)[1]))
            elif words[0] == "353":  # the names in a channel
                members = rest.split(" :", 1)[1].split()
                self.names.setdefault(words[3], set()).update(m.lstrip("@+") for m in members)
            elif words[0] == "NICK":
                self.renames.append((nick, words[1].lstrip(":")))
            elif words[0] == "JOIN":
                self.joins.append(nick)
                self.names.setdefault(words[1].lstrip(":"), set()).add(nick)

    def say(self, target: str, text: str) -> None:
        self._send(f"PRIVMSG {target} :{text}")

    async def join(self, channel: str, with_nick: str) -> None:
        """Join `channel` and wait until `with_nick` is in it too."""
        self._send(f"JOIN {channel}")
        await self.until(lambda: with_nick in self.names.get(channel, set()))

    def texts(self, target: str | None = None) -> list[str]:
        return [s.text for s in self.heard if target is None or s.target == target]

    async def until(self, check: Any, timeout: float = WAIT_S) -> Any:
        deadline = time.monotonic() + timeout
        while not (found := check()):
            assert time.monotonic() < deadline, f"timed out; {self.nick} heard {self.texts()}"
            await asyncio.sleep(0.02)
        return found
