"""A local Slack for the gateway's tests: the Web API methods the adapter calls
(`auth.test`, `apps.connections.open`, `chat.postMessage`, `chat.update`, and the file upload
flow `files.getUploadURLExternal`, a POST of the bytes to the upload URL it gave,
`files.completeUploadExternal`, with Slack's `{"ok": ...}` bodies and HTTP 429 +
`Retry-After`), a Socket Mode WebSocket that sends event envelopes and takes the
acknowledgements, and the private file URLs a shared file is downloaded from (only with the
bot token, else a redirect to the login page, as Slack does). Every envelope passes
slack_sdk's own `SocketModeRequest.from_dict`, and every block the bot sends its
`Block.parse_all`."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from aiohttp import WSMsgType, web
from slack_sdk.models.blocks import Block
from slack_sdk.socket_mode.request import SocketModeRequest

BOT_USER = "UBOT"
BOT_TOKEN = "xoxb-test"
WAIT_S = 60.0


@dataclass
class SlackMessage:
    channel: str
    ts: str
    text: str
    thread_ts: str | None = None
    blocks: list[dict[str, Any]] = field(default_factory=list)
    edits: list[str] = field(default_factory=list)

    @property
    def buttons(self) -> list[dict[str, Any]]:
        return [e for b in self.blocks if b["type"] == "actions" for e in b["elements"]]


@dataclass
class SlackFile:
    """A file the bot shared (the upload flow completed)."""

    id: str
    channel: str
    thread_ts: str | None
    title: str
    data: bytes


class FakeSlack:
    def __init__(self) -> None:
        self.messages: list[SlackMessage] = []
        self.acked: list[str] = []
        self.flood: list[int] = []
        self.refused = 0
        self.shared: dict[str, bytes] = {}
        """Files users shared: file id -> bytes, behind the private URLs."""
        self.downloads: list[str] = []
        """File ids downloaded with the bot token."""
        self.sent_files: list[SlackFile] = []
        self.flood_files: list[int] = []
        """Like `flood`, for `files.completeUploadExternal`."""
        self._uploads: dict[str, tuple[str, int, bytes | None]] = {}
        """Upload URLs given out: file id -> (file name, declared length, bytes once sent)."""
        self._file_ids = itertools.count(1)
        self.hold_sends = False
        """chat.postMessage requests wait unanswered while set (then fail with a 502)."""
        self.held = 0
        self._unsent: list[dict[str, Any]] = []
        self._socket: web.WebSocketResponse | None = None
        self.links = 0
        """Socket Mode connections the app opened."""
        self._ts = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def __enter__(self) -> FakeSlack:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(30)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/link", self._link)
        app.router.add_get("/files-pri/{team_file}/download/{name}", self._private_file)
        app.router.add_post("/upload/v1/{file_id}", self._upload)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    # ---- what users do ---------------------------------------------------------------------

    def user_says(
        self,
        text: str,
        *,
        user: str = "U1",
        channel: str = "D1",
        channel_type: str = "im",
        thread_ts: str | None = None,
    ) -> dict[str, Any]:
        event = {"type": "message", "channel": channel, "user": user, "text": text,
                 "ts": self._next_ts(), "channel_type": channel_type}  # fmt: skip
        if thread_ts:
            event["thread_ts"] = thread_ts
        payload = {"token": "t", "team_id": "T1", "api_app_id": "A1", "event": event,
                   "type": "event_callback", "event_id": f"Ev{uuid.uuid4().hex[:8]}",
                   "event_time": int(time.time())}  # fmt: skip
        return self._envelope("events_api", payload)

    def user_shares_file(
        self,
        data: bytes,
        name: str,
        mime: str,
        *,
        text: str = "",
        size: int | None = None,
        user: str = "U1",
    ) -> dict[str, Any]:
        """A `file_share` message, its file described as Slack does (size as announced)."""
        file_id = f"F{next(self._file_ids):08d}"
        self.shared[file_id] = data
        private = f"http://127.0.0.1:{self.port}/files-pri/T1-{file_id}"
        file = {"id": file_id, "created": int(time.time()), "timestamp": int(time.time()),
                "name": name, "title": name, "mimetype": mime, "filetype": "binary",
                "user": user, "size": len(data) if size is None else size, "mode": "hosted",
                "is_external": False, "is_public": False,
                "url_private": f"{private}/{name}",
                "url_private_download": f"{private}/download/{name}"}  # fmt: skip
        event = {"type": "message", "subtype": "file_share", "channel": "D1", "user": user,
                 "text": text, "ts": self._next_ts(), "channel_type": "im", "files": [file],
                 "upload": False}  # fmt: skip
        payload = {"token": "t", "team_id": "T1", "api_app_id": "A1", "event": event,
                   "type": "event_callback", "event_id": f"Ev{uuid.uuid4().hex[:8]}",
                   "event_time": int(time.time())}  # fmt: skip
        return self._envelope("events_api", payload)

    def press(self, message: SlackMessage, value: str, *, user: str = "U1") -> dict[str, Any]:
        payload = {
            "type": "block_actions", "user": {"id": user}, "trigger_id": "tr1",
            "channel": {"id": message.channel},
            "message": {"ts": message.ts, "text": message.text},
            "actions": [{"type": "button", "action_id": "talaria-0", "value": value}],
        }  # fmt: skip
        return self._envelope("interactive", payload)

    def redeliver(self, envelope: dict[str, Any]) -> None:
        """Slack sends the event again (a retry) in a new envelope."""
        again = {**envelope, "envelope_id": uuid.uuid4().hex, "retry_attempt": 1,
                 "retry_reason": "timeout"}  # fmt: skip
        self._push(again)

    def refresh(self) -> None:
        """Slack tells the app to reconnect (`disconnect`, `refresh_requested`: it does so every
        few hours) and closes the socket; what users say meanwhile waits for the next one."""

        async def refresh() -> None:
            socket, self._socket = self._socket, None
            if socket is not None:
                notice = {"type": "disconnect", "reason": "refresh_requested",
                          "debug_info": {"host": "fake"}}  # fmt: skip
                await socket.send_str(json.dumps(notice))
                await socket.close()

        asyncio.run_coroutine_threadsafe(refresh(), self._loop).result(30)

    def _envelope(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        envelope = {"envelope_id": uuid.uuid4().hex, "type": kind, "payload": payload,
                    "accepts_response_payload": False, "retry_attempt": 0}  # fmt: skip
        assert SocketModeRequest.from_dict(envelope) is not None  # as slack_sdk reads it
        self._push(envelope)
        return envelope

    def _push(self, envelope: dict[str, Any]) -> None:
        async def push() -> None:
            self._unsent.append(envelope)
            await self._flush()

        asyncio.run_coroutine_threadsafe(push(), self._loop).result(30)

    async def _flush(self) -> None:
        while self._socket is not None and self._unsent:
            await self._socket.send_str(json.dumps(self._unsent.pop(0)))

    def _next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    # ---- what the test checks --------------------------------------------------------------

    def texts(self) -> list[str]:
        return [m.text for m in self.messages]

    def find(self, text: str) -> SlackMessage | None:
        return next((m for m in self.messages if text in m.text and "▌" not in m.text), None)

    async def until(self, check: Any, timeout: float = WAIT_S) -> Any:
        deadline = time.monotonic() + timeout
        while not (found := check()):
            assert time.monotonic() < deadline, f"timed out; the bot sent {self.texts()}"
            await asyncio.sleep(0.02)
        return found

    # ---- the Web API and Socket Mode -------------------------------------------------------

    async def _link(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        await socket.send_str(json.dumps({"type": "hello", "num_connections": 1,
                                          "connection_info": {"app_id": "A1"}}))  # fmt: skip
        self._socket = socket
        self.links += 1
        await self._flush()
        async for message in socket:
            if message.type == WSMsgType.TEXT:
                data = json.loads(message.data)
                if "envelope_id" in data:
                    self.acked.append(data["envelope_id"])
        if self._socket is socket:
            self._socket = None
        return socket

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        raw = await request.read()
        if "json" in (request.content_type or ""):
            params = json.loads(raw or b"{}")
        else:
            params = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        params = {**request.query, **params}  # the SDK sends some methods' arguments so
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        return await handler(params)

    async def _auth_test(self, params: dict[str, Any]) -> web.Response:
        return web.json_response({"ok": True, "user_id": BOT_USER, "user": "talaria",
                                  "team_id": "T1", "bot_id": "B1"})  # fmt: skip

    async def _apps_connections_open(self, params: dict[str, Any]) -> web.Response:
        return web.json_response({"ok": True, "url": f"ws://127.0.0.1:{self.port}/link"})

    def _flooded(self, waits: list[int]) -> web.Response | None:
        """HTTP 429 with `Retry-After` while `waits` has waits left."""
        if not waits:
            return None
        self.refused += 1
        return web.json_response({"ok": False, "error": "ratelimited"}, status=429,
                                 headers={"Retry-After": str(waits.pop(0))})  # fmt: skip

    async def _chat_postMessage(self, params: dict[str, Any]) -> web.Response:
        if self.hold_sends:
            self.held += 1
            while self.hold_sends:
                await asyncio.sleep(0.02)
            return web.json_response({"ok": False, "error": "fatal_error"}, status=502)
        if refusal := self._flooded(self.flood):
            return refusal
        message = SlackMessage(params["channel"], self._next_ts(), params["text"],
                               params.get("thread_ts"), _blocks(params))  # fmt: skip
        self.messages.append(message)
        return web.json_response({"ok": True, "channel": message.channel, "ts": message.ts,
                                  "message": {"type": "message", "text": message.text,
                                              "user": BOT_USER, "bot_id": "B1",
                                              "ts": message.ts}})  # fmt: skip

    async def _chat_update(self, params: dict[str, Any]) -> web.Response:
        found = next((m for m in self.messages if m.ts == params["ts"]), None)
        if found is None or found.channel != params["channel"]:
            return web.json_response({"ok": False, "error": "message_not_found"})
        found.edits.append(found.text)
        found.text, found.blocks = params["text"], _blocks(params)
        return web.json_response({"ok": True, "channel": found.channel, "ts": found.ts,
                                  "text": found.text})  # fmt: skip

    async def _private_file(self, request: web.Request) -> web.StreamResponse:
        file_id = request.match_info["team_file"].removeprefix("T1-")
        if request.headers.get("Authorization") != f"Bearer {BOT_TOKEN}":
            raise web.HTTPFound("https://slack.com/signin")  # what Slack does without a token
        if file_id not in self.shared:
            raise web.HTTPNotFound()
        self.downloads.append(file_id)
        return web.Response(body=self.shared[file_id])

    async def _files_getUploadURLExternal(self, params: dict[str, Any]) -> web.Response:
        if not params.get("filename") or not str(params.get("length", "")).isdigit():
            return web.json_response({"ok": False, "error": "invalid_arguments"})
        file_id = f"F{next(self._file_ids):08d}"
        self._uploads[file_id] = (str(params["filename"]), int(params["length"]), None)
        url = f"http://127.0.0.1:{self.port}/upload/v1/{file_id}"
        return web.json_response({"ok": True, "upload_url": url, "file_id": file_id})

    async def _upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        data = await request.read()
        if file_id not in self._uploads or self._uploads[file_id][1] != len(data):
            return web.Response(status=400, text="invalid upload")
        name, length, _ = self._uploads[file_id]
        self._uploads[file_id] = (name, length, data)
        return web.Response(text=f"OK - {len(data)}")

    async def _files_completeUploadExternal(self, params: dict[str, Any]) -> web.Response:
        if refusal := self._flooded(self.flood_files):
            return refusal
        described = json.loads(params["files"])
        uploaded = [(f, self._uploads.get(f["id"])) for f in described]
        if any(upload is None or upload[2] is None for _, upload in uploaded):
            return web.json_response({"ok": False, "error": "file_not_found"})
        done = []
        for file, (name, length, data) in uploaded:  # type: ignore[misc]
            title = str(file.get("title") or name)
            self.sent_files.append(
                SlackFile(file["id"], params["channel_id"], params.get("thread_ts"), title, data)
            )
            done.append({"id": file["id"], "name": name, "title": title, "size": length})
        return web.json_response({"ok": True, "files": done})


def _blocks(params: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = params.get("blocks") or []
    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
    assert all(Block.parse(b) is not None for b in blocks)  # as slack_sdk reads them
    return list(blocks)
