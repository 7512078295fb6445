"""A real XMPP server for the XMPP gateway tests: Prosody (the distribution's `prosody`) on
loopback with a config of its own in a temporary folder, its users registered with
`prosodyctl register` before it starts, a multi-user chat service for group rooms, and an
HTTP upload service (XEP-0363, Prosody's mod_http_file_share) for files."""

from __future__ import annotations

import asyncio
import functools
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from chat_server import ServerProcess, free_port, require

DOMAIN = "example.test"
MUC = f"conference.{DOMAIN}"
UPLOAD = f"upload.{DOMAIN}"

CONFIG = """\
data_path = "{dir}/data"
certificates = "{dir}/certs"
daemonize = false
run_as_root = true
interfaces = {{ "127.0.0.1" }}
c2s_ports = {{ {port} }}
c2s_direct_tls_ports = {{ }}
s2s_ports = {{ }}
http_ports = {{ {http_port} }}
http_interfaces = {{ "127.0.0.1" }}
https_ports = {{ }}
http_default_host = "{upload}"
http_external_url = "http://127.0.0.1:{http_port}/"
modules_enabled = {{ "roster"; "saslauth"; "disco"; "ping"; "presence"; "message"; "iq" }}
modules_disabled = {{ "s2s"; "offline"; "posix" }}
authentication = "internal_plain"
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
log = {{ info = "{dir}/prosody.log"; error = "{dir}/prosody.err" }}
VirtualHost "{domain}"
Component "{muc}" "muc"
    muc_room_locking = false
    muc_room_default_public_jids = true
Component "{upload}" "http_file_share"
"""


class XmppServer:
    """Prosody with the users given to `start`, each `name@example.test`."""

    def __init__(self) -> None:
        self.prosody = require("prosody", "the prosody package")
        self.prosodyctl = require("prosodyctl", "the prosody package")
        self.process = ServerProcess("prosody")
        self.dir = self.process.directory
        self.port = free_port()
        self.http_port = free_port()
        self.config = self.dir / "prosody.cfg.lua"
        self.passwords: dict[str, str] = {}

    def start(self, users: dict[str, str]) -> None:
        (self.dir / "data").mkdir()
        (self.dir / "certs").mkdir()
        self.config.write_text(
            CONFIG.format(dir=self.dir, port=self.port, domain=DOMAIN, muc=MUC, upload=UPLOAD,
                          http_port=self.http_port)
        )  # fmt: skip
        # Each prosodyctl starts a Lua interpreter (~1 s): register the users side by side.
        registering = [
            subprocess.Popen(
                [self.prosodyctl, "--config", str(self.config), "register", name, DOMAIN, pw],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for name, pw in users.items()
        ]
        for (name, pw), proc in zip(users.items(), registering, strict=True):
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, f"prosodyctl register {name}: {err.decode()}"
            self.passwords[f"{name}@{DOMAIN}"] = pw
        self.process.spawn([self.prosody, "--config", str(self.config)])
        self.process.wait_listening(self.port)
        self.process.wait_listening(self.http_port)

    def stop(self) -> None:
        self.process.stop()


USERS = {"bot": "bot-pw", "alice": "alice-pw", "bob": "bob-pw", "mallory": "mallory-pw"}
"""The bot's account, two allowed users and a stranger."""


@pytest.fixture(scope="session")
def xmpp_server() -> Iterator[XmppServer]:
    server = XmppServer()
    try:
        server.start(USERS)
        yield server
    finally:
        server.stop()


class XmppUser:
    """A person in an XMPP client (slixmpp): chats with the bot, joins rooms, and keeps what
    it received as a client shows it (corrections applied)."""

    def __init__(self, server: XmppServer, name: str) -> None:
        from slixmpp import ClientXMPP

        self.jid = f"{name}@{DOMAIN}"
        self.client = ClientXMPP(f"{self.jid}/phone", server.passwords[self.jid])
        for plugin in ("xep_0030", "xep_0045", "xep_0066", "xep_0085", "xep_0308", "xep_0363"):
            self.client.register_plugin(plugin)
        self.client.enable_starttls = self.client.enable_direct_tls = False
        self.client.enable_plaintext = True
        self.client.plugin["feature_mechanisms"].unencrypted_scram = True
        self.client.plugin["feature_mechanisms"].unencrypted_plain = True
        self.port = server.port
        self.received: list[Received] = []
        self.states: list[str] = []
        self.client.add_event_handler("message", self._on_message)
        self.client.add_event_handler("groupchat_message", self._on_message)
        for state in ("active", "composing", "paused"):
            self.client.add_event_handler(
                f"chatstate_{state}", functools.partial(self._state, state)
            )

    async def __aenter__(self) -> XmppUser:
        ready = asyncio.get_running_loop().create_future()
        self.client.add_event_handler("session_start", lambda _: ready.set_result(None))
        self.client.connect("127.0.0.1", self.port)
        await asyncio.wait_for(ready, 60)
        self.client.send_presence()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.client.disconnect()

    def _state(self, state: str, msg: Any) -> None:
        self.states.append(state)

    def _on_message(self, msg: Any) -> None:
        if not msg["body"]:
            return
        replaced = msg["replace"]["id"]
        for earlier in self.received:
            if replaced and earlier.id == replaced:
                earlier.edits.append(earlier.body)
                earlier.body = msg["body"]
                return
        received = Received(msg["id"], str(msg["from"]), msg["type"], msg["body"])
        received.file_url = msg["oob"]["url"] or None
        self.received.append(received)

    def say(self, to: str, text: str, room: bool = False, message_id: str = "") -> str:
        kind = "groupchat" if room else "chat"
        message = self.client.make_message(mto=to, mbody=text, mtype=kind)
        if message_id:  # the same stanza again, as a client resending after a lost stream does
            message["id"] = message_id
        message.send()
        return str(message["id"])

    async def join(self, room: str, nick: str) -> None:
        await self.client.plugin["xep_0045"].join_muc_wait(room, nick, maxstanzas=0)

    async def wait_for(self, check: Any, timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while not (found := check()):
            assert time.monotonic() < deadline, f"not seen in {timeout:g} s: {self.received}"
            await asyncio.sleep(0.05)
        return found


class Received:
    def __init__(self, id: str, sender: str, kind: str, body: str) -> None:
        self.id, self.sender, self.kind, self.body = id, sender, kind, body
        self.edits: list[str] = []
        self.file_url: str | None = None
        """The link of a file sent with the message (XEP-0066)."""

    def __repr__(self) -> str:
        return f"Received({self.sender!r}, {self.body!r}, edits={self.edits!r})"
