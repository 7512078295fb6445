"""`ScriptedProvider`: a real local HTTP server that speaks the providers' wire formats.

Tests point the official SDKs at it, so they exercise real HTTP, real SSE parsing and the SDKs'
own error mapping. Each POST consumes one script step; the wire module for the path decides
the shapes, this module decides timing and failure (delays, drops, stalls, malformed bodies).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import socket
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import TYPE_CHECKING, Any

from talaria.testing.script import (
    Drop,
    Endless,
    Fail,
    Malformed,
    Reply,
    Script,
    ScriptExhausted,
    Stall,
    Step,
    StepSource,
)
from talaria.testing.wire_base import WireFormat, prompt_tokens

if TYPE_CHECKING:
    import ssl

ROUTES: dict[str, str] = {
    "/v1/chat/completions": "talaria.testing.wire_chat",
    "/v1/responses": "talaria.testing.wire_responses",
    "/v1/messages": "talaria.testing.wire_anthropic",
}
"""The official SDKs always send the /v1 prefix (it is part of the OpenAI base URL and of the
Anthropic SDK's paths), so only these paths are served."""


@dataclass(slots=True)
class RecordedRequest:
    """One POST the server received, valid or not."""

    path: str
    api_mode: str
    headers: dict[str, str]
    body: dict[str, Any]
    valid: bool
    errors: list[str] = field(default_factory=list)


class _QuietServer(ThreadingHTTPServer):
    """Clients hanging up (keep-alive closes, cancelled streams) is normal here, not an error.
    A deep listen backlog: hundreds of agents connecting at once must not be refused."""

    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            super().handle_error(request, client_address)


class ScriptedProvider:
    """A scripted model endpoint on 127.0.0.1 (port chosen by the OS).

    With ``strict=True`` a request the real provider would reject gets the wire's 400 error
    and does not consume a step, so the test sees the bug instead of a wrong answer.

    With ``n_ctx`` set it also plays a llama.cpp server started with ``--ctx-size n_ctx``:
    ``GET /props`` and ``GET /slots`` report that window, ``GET /v1/models`` only the training
    context (``context_length``), and a prompt over the window gets llama.cpp's 400
    ``exceed_context_size_error`` (without consuming a step).

    With ``ssl_context`` (a server-side context holding a certificate) it serves ``https://``,
    for testing what a TLS endpoint costs or requires.
    """

    def __init__(
        self,
        steps: list[StepSource] | None = None,
        *,
        script: Script | None = None,
        strict: bool = True,
        model: str = "scripted-model",
        context_length: int = 128_000,
        n_ctx: int | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.script = script if script is not None else Script(steps)
        self.strict = strict
        self.model = model
        self.context_length = context_length
        self.n_ctx = n_ctx
        self.ssl_context = ssl_context
        self.overflows = 0
        """Requests refused because their prompt was over ``n_ctx``."""
        self.requests: list[RecordedRequest] = []
        self.connections_opened = 0
        """Connections accepted so far: how a test sees that a client keeps them alive."""
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("ScriptedProvider is not started")
        host, port = self._httpd.server_address[:2]
        scheme = "http" if self.ssl_context is None else "https"
        return f"{scheme}://{host!s}:{port}"

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    @property
    def invalid_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [request for request in self.requests if not request.valid]

    def add(self, *steps: StepSource) -> None:
        with self._lock:
            self.script.add(*steps)

    def start(self) -> ScriptedProvider:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _QuietServer(("127.0.0.1", 0), _Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        httpd.provider = self  # type: ignore[attr-defined]
        if self.ssl_context is not None:
            httpd.socket = self.ssl_context.wrap_socket(httpd.socket, server_side=True)
        self._httpd = httpd
        # `stop` waits for the serving thread to look again, and a test suite stops one per test.
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; open streams (even stalled ones) are cut at once."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedProvider:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # Called from handler threads.

    def _track(self, connection: socket.socket, open_: bool) -> None:
        with self._lock:
            if open_:
                self._connections.add(connection)
                self.connections_opened += 1
            else:
                self._connections.discard(connection)

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _overflowed(self) -> None:
        with self._lock:
            self.overflows += 1

    def _next_step(self, body: dict[str, Any]) -> Step:
        with self._lock:
            return self.script.next(body)

    def _wait(self, seconds: float) -> bool:
        """Sleep unless the server stops first; True when the server is stopping."""
        if seconds <= 0:
            return self._stopping.is_set()
        return self._stopping.wait(seconds)


class _Handler(BaseHTTPRequestHandler):
    """One connection; HTTP/1.1 keep-alive so the SDKs reuse it as they would in production."""

    protocol_version = "HTTP/1.1"
    server_version = "talaria-scripted/1"

    @property
    def provider(self) -> ScriptedProvider:
        return self.server.provider  # type: ignore[attr-defined]

    def setup(self) -> None:
        super().setup()
        # Small SSE frames must leave at once: Nagle + delayed ACK would add ~40 ms per call.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.provider._track(self.connection, True)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.provider._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: test output stays readable."""

    def do_GET(self) -> None:
        provider = self.provider
        path = self.path.rstrip("/")
        if path == "/v1/models":
            self._json(200, {"object": "list", "data": [_model_entry(provider)]})
        elif path == "/props" and provider.n_ctx:
            settings = {"n_ctx": provider.n_ctx, "params": {"n_predict": -1}}
            self._json(
                200,
                {
                    "default_generation_settings": settings,
                    "total_slots": 1,
                    "model_path": f"models/{provider.model}.gguf",
                },
            )
        elif path == "/slots" and provider.n_ctx:
            self._json(200, [{"id": 0, "n_ctx": provider.n_ctx, "is_processing": False}])
        else:
            self._json(404, _plain_error(f"no route for GET {self.path}"))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        module = ROUTES.get(self.path.split("?", 1)[0])
        if module is None:
            self._json(404, _plain_error(f"no route for POST {self.path}"))
            return
        try:
            wire: WireFormat = importlib.import_module(module).WIRE
        except ImportError as exc:
            self._json(404, _plain_error(f"wire format {module} is not available: {exc}"))
            return
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._json(
                400, wire.error_body(400, "We could not parse the JSON body of your request.")
            )
            return
        self._answer(wire, body)

    def _answer(self, wire: WireFormat, body: dict[str, Any]) -> None:
        provider = self.provider
        errors = wire.validate(body)
        headers = {key.lower(): value for key, value in self.headers.items()}
        valid = not errors
        provider._record(RecordedRequest(self.path, wire.api_mode, headers, body, valid, errors))
        if errors and provider.strict:
            self._json(400, wire.error_body(400, "; ".join(errors)))
            return
        if provider.n_ctx and prompt_tokens(body) > provider.n_ctx:
            provider._overflowed()
            self._json(400, _exceeds_context(prompt_tokens(body), provider.n_ctx))
            return
        try:
            step = provider._next_step(body)
        except ScriptExhausted as exc:
            message = f"{exc}: add more steps to the ScriptedProvider"
            self._json(500, wire.error_body(500, message))
            return
        self._play(wire, body, step)

    def _play(self, wire: WireFormat, body: dict[str, Any], step: Step) -> None:
        provider = self.provider
        if isinstance(step, Fail):
            if provider._wait(step.delay):
                return
            payload = (
                step.body if step.body is not None else wire.error_body(step.status, step.message)
            )
            self._json(step.status, payload, step.headers)
        elif isinstance(step, Malformed):
            self._send(200, step.raw.encode(), "application/json")
        elif isinstance(step, Reply):
            self._reply(wire, body, step)
        elif isinstance(step, Drop):
            self._reply(wire, body, step.reply, cut_after=step.after_chunks, clean=step.clean)
        elif isinstance(step, Stall):
            self._reply(wire, body, step.reply, stall=(step.after_chunks, step.seconds))
        elif isinstance(step, Endless):
            self._endless(wire, body, step)

    def _endless(self, wire: WireFormat, body: dict[str, Any], step: Endless) -> None:
        """The wire's opening frames, then its text-delta frame again and again (a request
        that does not stream gets no answer at all)."""
        if not body.get("stream"):
            while not self.provider._wait(step.interval):
                pass
            return
        frames = wire.render_stream(Reply(text=step.text * 2, chunk_size=len(step.text)), body)
        marker = json.dumps(step.text).encode()
        first = next(i for i, frame in enumerate(frames) if marker in frame)
        self._open_stream()
        try:
            for frame in frames[:first]:
                self._frame(frame)
            while not self.provider._wait(step.interval):
                self._frame(frames[first])
        except OSError:
            pass
        self._cut()

    def _reply(
        self,
        wire: WireFormat,
        body: dict[str, Any],
        reply: Reply,
        *,
        cut_after: int | None = None,
        stall: tuple[int, float] | None = None,
        clean: bool = False,
    ) -> None:
        """Answer with ``reply``; cut the connection (or, `clean`, end the response) or go
        silent part-way when asked."""
        if self.provider._wait(reply.delay):
            return
        if not body.get("stream"):
            if cut_after is not None:
                self._cut()
            elif stall is None or not self.provider._wait(stall[1]):
                self._json(200, wire.render(reply, body))
            return
        frames = wire.render_stream(reply, body)
        if clean and cut_after is not None:
            frames, cut_after = frames[:cut_after], None
        self._stream(frames, reply.chunk_delay, cut_after, stall)

    def _stream(
        self,
        frames: list[bytes],
        chunk_delay: float,
        cut_after: int | None,
        stall: tuple[int, float] | None,
    ) -> None:
        provider = self.provider
        self._open_stream()
        try:
            for sent, frame in enumerate(frames):
                if sent == cut_after:
                    self._cut()
                    return
                if stall is not None and sent == stall[0] and provider._wait(stall[1]):
                    self._cut()
                    return
                if sent and provider._wait(chunk_delay):
                    self._cut()
                    return
                self._frame(frame)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True

    def _open_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _frame(self, frame: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))

    def _cut(self) -> None:
        """Close the socket abruptly: no terminating chunk, no further requests on it."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        self._send(status, data.encode(), "application/json", headers)

    def _send(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True


def _model_entry(provider: ScriptedProvider) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": provider.model, "object": "model", "created": 0}
    if provider.n_ctx:  # llama.cpp lists only the training context here
        return {**entry, "owned_by": "llamacpp", "meta": {"n_ctx_train": provider.context_length}}
    return {
        **entry,
        "owned_by": "talaria",
        "context_length": provider.context_length,
        "max_model_len": provider.context_length,
    }


def _exceeds_context(tokens: int, n_ctx: int) -> dict[str, Any]:
    """llama.cpp's answer to a prompt longer than its context."""
    return {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": tokens,
            "n_ctx": n_ctx,
        }
    }


def _plain_error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "not_found", "param": None, "code": None}}
