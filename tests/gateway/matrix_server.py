"""A real Matrix homeserver for the Matrix gateway tests and bench: Synapse (from the package
index, in a venv of its own: `.ci/synapse-venv`, made by .ci/run) on loopback with SQLite,
no federation, rate limits out of the way, and users registered through the admin API with
the registration shared secret (HMAC-SHA1 over nonce, user, password and admin flag)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_server import START_S, ServerProcess, free_port, require

SERVER_NAME = "localhost"
ROOT = Path(__file__).resolve().parents[2]
PYTHON = os.environ.get(
    "TALARIA_SYNAPSE_PYTHON", str(ROOT / ".ci" / "synapse-venv" / "bin" / "python")
)

UNLIMITED = {"per_second": 10000, "burst_count": 10000}
CONFIG: dict[str, Any] = {
    "server_name": SERVER_NAME,
    "report_stats": False,
    "enable_metrics": False,
    "trusted_key_servers": [],
    "suppress_key_server_warning": True,
    "presence": {"enabled": False},
    "url_preview_enabled": False,
    "bcrypt_rounds": 4,  # registering a test user costs milliseconds, not seconds
    "rc_message": UNLIMITED,
    "rc_registration": UNLIMITED,
    "rc_login": {"address": UNLIMITED, "account": UNLIMITED, "failed_attempts": UNLIMITED},
    "rc_joins": {"local": UNLIMITED, "remote": UNLIMITED},
    "rc_invites": {"per_room": UNLIMITED, "per_user": UNLIMITED, "per_issuer": UNLIMITED},
    "rc_admin_redaction": UNLIMITED,
    "rc_room_creation": UNLIMITED,
    "rc_joins_per_room": UNLIMITED,
    "rc_profile": UNLIMITED,
}


class Synapse:
    """One homeserver; `register` makes users, `url` is its client API base."""

    def __init__(self) -> None:
        self.python = require(PYTHON, "matrix-synapse (.ci/run makes .ci/synapse-venv)")
        self.process = ServerProcess("synapse")
        self.dir = self.process.directory
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.secret = secrets.token_hex(16)
        self.started_in = 0.0
        """Seconds from spawning Synapse to its client API answering."""

    def start(self) -> None:
        seed = base64.b64encode(os.urandom(32)).decode().rstrip("=")
        (self.dir / "signing.key").write_text(f"ed25519 a_test {seed}\n")
        config = {
            **CONFIG,
            "pid_file": str(self.dir / "homeserver.pid"),
            "signing_key_path": str(self.dir / "signing.key"),
            "media_store_path": str(self.dir / "media"),
            "database": {"name": "sqlite3", "args": {"database": str(self.dir / "home.db")}},
            "registration_shared_secret": self.secret,
            "macaroon_secret_key": secrets.token_hex(16),
            "form_secret": secrets.token_hex(16),
            "listeners": [
                {
                    "port": self.port,
                    "bind_addresses": ["127.0.0.1"],
                    "type": "http",
                    "tls": False,
                    "x_forwarded": False,
                    "resources": [{"names": ["client"], "compress": False}],
                }
            ],
        }
        (self.dir / "homeserver.yaml").write_text(json.dumps(config))  # YAML is a superset
        began = time.monotonic()
        self.process.spawn(
            [self.python, "-m", "synapse.app.homeserver", "-c", str(self.dir / "homeserver.yaml")]
        )
        self._wait_ready()
        self.started_in = time.monotonic() - began

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_S
        while True:
            assert self.process.proc is not None
            if self.process.proc.poll() is not None:
                raise AssertionError(f"synapse exited at start:\n{self.process.log()}")
            try:
                self._request("GET", "/_matrix/client/versions")
                return
            except (OSError, urllib.error.URLError):
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"synapse did not answer in {START_S:g} s:\n{self.process.log()}"
                    ) from None
                time.sleep(0.2)

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def register(self, name: str, password: str = "secret", admin: bool = False) -> str:
        """A new user through the shared-secret admin API; returns its access token."""
        nonce = self._request("GET", "/_synapse/admin/v1/register")["nonce"]
        flag = "admin" if admin else "notadmin"
        signed = b"\x00".join(part.encode() for part in (nonce, name, password, flag))
        mac = hmac.new(self.secret.encode(), signed, hashlib.sha1)
        answer = self._request(
            "POST",
            "/_synapse/admin/v1/register",
            {"nonce": nonce, "username": name, "password": password, "admin": admin,
             "mac": mac.hexdigest()},
        )  # fmt: skip
        return str(answer["access_token"])

    def user_id(self, name: str) -> str:
        return f"@{name}:{SERVER_NAME}"

    def stop(self) -> None:
        self.process.stop()


@pytest.fixture(scope="session")
def synapse() -> Iterator[Synapse]:
    server = Synapse()
    try:
        server.start()
        yield server
    finally:
        server.stop()


class MatrixUser:
    """A person in a Matrix client (matrix-nio): makes rooms, talks, reacts, and reads what
    the bot posted (with edits applied, as a client shows them)."""

    def __init__(self, server: Synapse, name: str) -> None:
        from nio import AsyncClient

        self.user_id = server.user_id(name)
        self.client = AsyncClient(server.url, self.user_id, device_id=f"{name.upper()}_DEV")
        self.client.access_token = server.register(name)
        self.client.user_id = self.user_id
        self.events: list[dict[str, Any]] = []
        """Every room event this user has seen, raw, oldest first."""
        self.typing: dict[str, list[str]] = {}
        """Room id -> who the client shows typing there now (`m.typing` ephemeral events)."""

    async def __aenter__(self) -> MatrixUser:
        await self.client.sync(timeout=0, full_state=True)
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.client.close()

    async def create_room(self, invite: list[str], direct: bool = False) -> str:
        from nio import RoomCreateResponse

        response = await self.client.room_create(invite=invite, is_direct=direct)
        assert isinstance(response, RoomCreateResponse), response
        return str(response.room_id)

    async def invite(self, room_id: str, user_id: str) -> None:
        await self.client.room_invite(room_id, user_id)

    async def join(self, room_id: str) -> None:
        await self.client.join(room_id)

    async def say(self, room_id: str, text: str, **content: Any) -> str:
        from nio import RoomSendResponse

        body = {"msgtype": "m.text", "body": text, **content}
        response = await self.client.room_send(room_id, "m.room.message", body)
        assert isinstance(response, RoomSendResponse), response
        return str(response.event_id)

    async def react(self, room_id: str, event_id: str, key: str) -> None:
        annotation = {"rel_type": "m.annotation", "event_id": event_id, "key": key}
        await self.client.room_send(room_id, "m.reaction", {"m.relates_to": annotation})

    async def sync(self) -> None:
        from nio import SyncResponse, TypingNoticeEvent

        response = await self.client.sync(timeout=1000)
        assert isinstance(response, SyncResponse), response
        for room_id, room in response.rooms.join.items():
            self.events.extend({**e.source, "room_id": room_id} for e in room.timeline.events)
            for notice in room.ephemeral:
                if isinstance(notice, TypingNoticeEvent):
                    self.typing[room_id] = list(notice.users)

    def messages(self, room_id: str | None = None, sender: str | None = None) -> list[Message]:
        """The room's messages as a client shows them: edits applied, reactions attached."""
        shown: dict[str, Message] = {}
        for event in self.events:
            content = event.get("content", {})
            relates = content.get("m.relates_to") or {}
            if event.get("type") == "m.reaction" and relates.get("event_id") in shown:
                shown[relates["event_id"]].reactions.append(relates.get("key", ""))
            elif event.get("type") != "m.room.message":
                continue
            elif relates.get("rel_type") == "m.replace" and relates.get("event_id") in shown:
                edited = shown[relates["event_id"]]
                edited.edits.append(edited.body)
                edited.body = content["m.new_content"]["body"]
            else:
                shown[event["event_id"]] = Message(event, content.get("body", ""))
        return [
            m for m in shown.values()
            if (sender is None or m.sender == sender) and (room_id is None or m.room_id == room_id)
        ]  # fmt: skip

    async def wait_for(self, check: Any, timeout: float = 60.0) -> Any:
        """Sync until `check()` returns something true, and return it."""
        deadline = time.monotonic() + timeout
        while not (found := check()):
            assert time.monotonic() < deadline, f"not seen in {timeout:g} s: {self.events[-5:]}"
            await self.sync()
        return found


class Message:
    """A message as a Matrix client shows it."""

    def __init__(self, event: dict[str, Any], body: str) -> None:
        self.event_id: str = event["event_id"]
        self.sender: str = event["sender"]
        self.room_id: str = event["room_id"]
        self.content: dict[str, Any] = event.get("content", {})
        self.body = body
        self.edits: list[str] = []
        self.reactions: list[str] = []
