"""A local Telegram Bot API server for the gateway's tests: the documented wire format
(`{"ok": true, "result": ...}`, `{"ok": false, "error_code": 429, "parameters":
{"retry_after": N}}`), long-polled `getUpdates` with offsets, and the bot's messages kept as
a user would see them. Every update it hands out and every keyboard the bot sends is checked
with python-telegram-bot's own parsers (`Update.de_json`, `InlineKeyboardMarkup.de_json`).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.parser
import email.policy
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from telegram import InlineKeyboardMarkup, Update

from helpers import serving

BOT = {"id": 999, "is_bot": True, "first_name": "Talaria", "username": "talaria_bot"}
WAIT_S = 60.0


@dataclass
class BotMessage:
    chat_id: int
    message_id: int
    text: str
    keyboard: list[list[dict[str, Any]]] = field(default_factory=list)
    reply_to: int | None = None
    thread_id: int | None = None
    edits: list[str] = field(default_factory=list)


@dataclass
class BotFile:
    """A file the bot sent (sendPhoto or sendDocument), as the user receives it."""

    chat_id: int
    message_id: int
    method: str
    name: str
    data: bytes


class FakeTelegram:
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.confirmed = 0
        """The offset the bot last asked with: updates below it are confirmed."""
        self.messages: list[BotMessage] = []
        self.actions: list[tuple[int, str]] = []
        self.answered_queries: list[str] = []
        self.flood: list[int] = []
        self.refused = 0
        self.flood_edits: list[int] = []
        """Like `flood`, for editMessageText only."""
        self.edit_requests: list[str] = []
        """The text of every editMessageText request, refused ones too, in order."""
        self.hold_sends = False
        """Take sendMessage requests and never answer them (a send lost on the way)."""
        self.hold_files = False
        """The same for sendPhoto and sendDocument."""
        self.hold_downloads = False
        """The same for getFile (a download the bot started and never finished)."""
        self.held = 0
        self.failing_polls = 0
        """getUpdates answers 502 Bad Gateway this many more times (a proxy in trouble)."""
        self.files: dict[str, bytes] = {}
        """file_id -> the bytes a user sent (served by getFile and the file URL)."""
        self.downloads: list[str] = []
        self.sent_files: list[BotFile] = []
        self.flood_files: list[int] = []
        """Like `flood`, for file uploads only."""
        self.refuse_files = False
        """Refuse uploads for good (HTTP 400), as for a file over the Bot API's limit."""
        self._ids = itertools.count(1)
        self._message_ids = itertools.count(100)
        self._changed = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._serving = serving(self._server)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/bot"

    def __enter__(self) -> FakeTelegram:
        self._serving.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.hold_sends = self.hold_files = self.hold_downloads = False
        with self._changed:
            self._changed.notify_all()
        self._serving.__exit__(None, None, None)

    # ---- what users do ---------------------------------------------------------------------

    def user_says(
        self,
        text: str,
        *,
        user_id: int = 1,
        chat_id: int | None = None,
        chat_type: str = "private",
        reply_to: BotMessage | None = None,
    ) -> dict[str, Any]:
        chat = {"id": chat_id or user_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = f"user{user_id}"
        else:
            chat["title"] = "the group"
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
            "from": {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"},
            "text": text,
        }
        mention = f"@{BOT['username']}"
        if mention in text:
            offset = text.index(mention)
            message["entities"] = [{"type": "mention", "offset": offset, "length": len(mention)}]
        if reply_to is not None:
            message["reply_to_message"] = {
                "message_id": reply_to.message_id, "date": int(time.time()),
                "chat": chat, "from": BOT, "text": reply_to.text,
            }  # fmt: skip
        return self._add({"message": message})

    def user_sends_file(
        self,
        data: bytes,
        *,
        name: str = "",
        mime: str = "",
        caption: str = "",
        size: int | None = None,
        user_id: int = 1,
    ) -> dict[str, Any]:
        """A photo (without `name`) or a document; `size` is what Telegram announces."""
        file_id = f"f{len(self.files) + 1}"
        self.files[file_id] = data
        meta = {"file_id": file_id, "file_unique_id": f"u{file_id}",
                "file_size": len(data) if size is None else size}  # fmt: skip
        chat = {"id": user_id, "type": "private", "first_name": f"user{user_id}"}
        message: dict[str, Any] = {
            "message_id": next(self._message_ids), "date": int(time.time()), "chat": chat,
            "from": {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"},
        }  # fmt: skip
        if caption:
            message["caption"] = caption
        if name:
            message["document"] = {**meta, "file_name": name, "mime_type": mime}
        else:
            message["photo"] = [{**meta, "width": 1, "height": 1}]
        return self._add({"message": message})

    def press(self, message: BotMessage, data: str, *, user_id: int = 1) -> dict[str, Any]:
        chat = {"id": message.chat_id, "type": "private", "first_name": f"user{user_id}"}
        query = {
            "id": f"q{next(self._ids)}",
            "from": {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"},
            "chat_instance": "ci",
            "data": data,
            "message": {"message_id": message.message_id, "date": int(time.time()),
                        "chat": chat, "from": BOT, "text": message.text},
        }  # fmt: skip
        return self._add({"callback_query": query})

    def redeliver(self, update: dict[str, Any]) -> None:
        """Telegram hands the same update out again (as after a lost confirmation)."""
        with self._changed:
            self.updates.append(update)
            self._changed.notify_all()

    def _add(self, body: dict[str, Any]) -> dict[str, Any]:
        update = {"update_id": next(self._ids), **body}
        assert Update.de_json(update, None) is not None  # the library's own parser takes it
        self.redeliver(update)
        return update

    # ---- what the test checks --------------------------------------------------------------

    def texts(self, chat_id: int | None = None) -> list[str]:
        return [m.text for m in self.messages if chat_id is None or m.chat_id == chat_id]

    async def until(self, check: Any, timeout: float = WAIT_S) -> Any:
        """Wait on the test's loop until `check()` returns something true; that value."""
        deadline = time.monotonic() + timeout
        while not (found := check()):
            assert time.monotonic() < deadline, f"timed out; the bot sent {self.texts()}"
            await asyncio.sleep(0.02)
        return found

    def find(self, text: str) -> BotMessage | None:
        """The bot's message with `text` in it (a finished one, not a streamed preview)."""
        return next((m for m in self.messages if text in m.text and "▌" not in m.text), None)

    # ---- the Bot API -----------------------------------------------------------------------

    def _call(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        handler = getattr(self, f"_api_{method.lower()}", None)
        if handler is None:
            return 404, {"ok": False, "error_code": 404, "description": "Not Found"}
        return handler(params)

    def _api_getme(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, {"ok": True, "result": BOT}

    def _api_deletewebhook(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, {"ok": True, "result": True}

    def _api_getupdates(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._changed:
            if self.failing_polls > 0:
                self.failing_polls -= 1
                return 502, {"ok": False, "error_code": 502, "description": "Bad Gateway"}
        offset = int(params.get("offset") or 0)
        deadline = time.monotonic() + float(params.get("timeout") or 0)
        with self._changed:
            if offset:
                self.confirmed = offset
                self.updates = [u for u in self.updates if u["update_id"] >= offset]
            while not self.updates and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())
            return 200, {"ok": True, "result": list(self.updates)}

    def _flooded(self, waits: list[int] | None = None) -> tuple[int, dict[str, Any]] | None:
        """The 429 for a send while `waits` (`flood` unless given) has waits left (the lock
        is held)."""
        waits = self.flood if waits is None else waits
        if not waits:
            return None
        self.refused += 1
        wait = waits.pop(0)
        return 429, {"ok": False, "error_code": 429,
                     "description": f"Too Many Requests: retry after {wait}",
                     "parameters": {"retry_after": wait}}  # fmt: skip

    def _api_sendmessage(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._changed:
            if refusal := self._flooded():
                return refusal
            if refusal := self._held("hold_sends"):
                return refusal
            message = BotMessage(
                int(params["chat_id"]), next(self._message_ids), str(params["text"]),
                _keyboard(params), _int(params.get("reply_to_message_id")),
                _int(params.get("message_thread_id")),
            )  # fmt: skip
            self.messages.append(message)
        return 200, {"ok": True, "result": _message_json(message)}

    def _held(self, switch: str) -> tuple[int, dict[str, Any]] | None:
        """While the switch is on, a send is taken and left unanswered until it is turned
        off, then refused (the lock is held)."""
        if not getattr(self, switch):
            return None
        self.held += 1
        self._changed.notify_all()
        while getattr(self, switch):
            self._changed.wait()
        return 502, {"ok": False, "error_code": 502, "description": "Bad Gateway"}

    def _api_editmessagetext(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._changed:
            self.edit_requests.append(str(params["text"]))
            if refusal := self._flooded(self.flood_edits):
                return refusal
            message = next(
                (m for m in self.messages if m.message_id == int(params["message_id"])), None
            )
            if message is None or message.chat_id != int(params["chat_id"]):
                return 400, {"ok": False, "error_code": 400,
                             "description": "Bad Request: message to edit not found"}  # fmt: skip
            keyboard = _keyboard(params)
            if message.text == params["text"] and message.keyboard == keyboard:
                return 400, {"ok": False, "error_code": 400,
                             "description": "Bad Request: message is not modified"}  # fmt: skip
            message.edits.append(message.text)
            message.text, message.keyboard = str(params["text"]), keyboard
        return 200, {"ok": True, "result": _message_json(message)}

    def _api_getfile(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._changed:
            if refusal := self._held("hold_downloads"):
                return refusal
        file_id = str(params["file_id"])
        if file_id not in self.files:
            return 400, {
                "ok": False,
                "error_code": 400,
                "description": "Bad Request: invalid file_id",
            }
        size = len(self.files[file_id])
        result = {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": size,
                  "file_path": f"documents/{file_id}"}  # fmt: skip
        return 200, {"ok": True, "result": result}

    def _download(self, path: str) -> bytes | None:
        """`/file/bot<token>/<file_path>`: the bytes of a file a user sent."""
        file_id = path.rsplit("/", 1)[-1]
        self.downloads.append(file_id)
        return self.files.get(file_id)

    def _api_sendphoto(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return self._sent_file("photo", params)

    def _api_senddocument(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return self._sent_file("document", params)

    def _sent_file(self, field_name: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        name, data = params[field_name]
        with self._changed:
            if refusal := self._flooded(self.flood_files) or self._held("hold_files"):
                return refusal
            if self.refuse_files:
                return 400, {"ok": False, "error_code": 400,
                             "description": "Bad Request: file is too big"}  # fmt: skip
            sent = BotFile(int(params["chat_id"]), next(self._message_ids), field_name, name, data)
            self.sent_files.append(sent)
        meta = {"file_id": f"b{sent.message_id}", "file_unique_id": f"ub{sent.message_id}"}
        result: dict[str, Any] = {
            "message_id": sent.message_id, "date": int(time.time()),
            "chat": {"id": sent.chat_id, "type": "private"}, "from": BOT,
        }  # fmt: skip
        if field_name == "photo":
            result["photo"] = [{**meta, "width": 1, "height": 1}]
        else:
            result["document"] = {**meta, "file_name": name}
        return 200, {"ok": True, "result": result}

    def _api_sendchataction(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.actions.append((int(params["chat_id"]), str(params["action"])))
        return 200, {"ok": True, "result": True}

    def _api_answercallbackquery(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.answered_queries.append(str(params["callback_query_id"]))
        return 200, {"ok": True, "result": True}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                method = self.path.rsplit("/", 1)[-1]
                status, payload = fake._call(method, _params(self.headers, body))
                data = json.dumps(payload).encode()
                with contextlib.suppress(ConnectionError):  # the bot went away (stopped)
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            def do_GET(self) -> None:
                if not self.path.startswith("/file/bot"):
                    self.do_POST()
                    return
                data = fake._download(self.path)
                self.send_response(200 if data is not None else 404)
                self.send_header("Content-Length", str(len(data or b"")))
                self.end_headers()
                self.wfile.write(data or b"")

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


def _params(headers: Any, body: bytes) -> dict[str, Any]:
    """A Bot API call's parameters: JSON, or a form whose values may be JSON-encoded."""
    kind = headers.get("Content-Type") or ""
    if "json" in kind:
        return dict(json.loads(body or b"{}"))
    if "multipart/form-data" in kind:
        return _multipart(kind, body)
    params: dict[str, Any] = {}
    for key, values in parse_qs(body.decode()).items():
        try:
            params[key] = json.loads(values[0])
        except ValueError:
            params[key] = values[0]
    return params


def _multipart(kind: str, body: bytes) -> dict[str, Any]:
    """A form with files (how files are uploaded): a file field is (file name, bytes)."""
    head = f"Content-Type: {kind}\r\n\r\n".encode()
    form = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    params: dict[str, Any] = {}
    for part in form.iter_parts():
        key = str(part.get_param("name", header="content-disposition"))
        data = part.get_payload(decode=True)
        if part.get_filename():
            params[key] = (part.get_filename(), data)
            continue
        try:
            params[key] = json.loads(data)
        except ValueError:
            params[key] = data.decode()
    return params


def _keyboard(params: dict[str, Any]) -> list[list[dict[str, Any]]]:
    markup = params.get("reply_markup")
    if not markup:
        return []
    markup = json.loads(markup) if isinstance(markup, str) else markup
    assert InlineKeyboardMarkup.de_json(markup, None) is not None  # as the library reads it
    return list(markup["inline_keyboard"])


def _int(value: Any) -> int | None:
    return int(value) if value not in (None, "") else None


def _message_json(message: BotMessage) -> dict[str, Any]:
    data: dict[str, Any] = {
        "message_id": message.message_id,
        "date": int(time.time()),
        "chat": {"id": message.chat_id, "type": "private"},
        "from": BOT,
        "text": message.text,
    }
    if message.keyboard:
        data["reply_markup"] = {"inline_keyboard": message.keyboard}
    return data
