"""talaria's own HTTP transport: the shared pool, the SSE reader, per-provider auth, errors.

Real parts throughout: the scripted provider is a real HTTP server, agents run in real
subprocesses where the process's state (imported modules, open sockets, warnings) is the
thing under test.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import MODES, serving
from talaria.core import ModelRequest
from talaria.providers.errors import ErrorKind, ProviderError
from talaria.providers.transport.sse import Event, events, json_events
from talaria.providers.wire.anthropic_messages import AnthropicMessagesClient
from talaria.providers.wire.chat_completions import ChatCompletionsClient
from talaria.testing import Fail, Reply, ScriptedProvider, text
from tls_support import server_context

REPO = Path(__file__).resolve().parents[2]


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO / 'tests'}"}
    return subprocess.run(
        [sys.executable, *args, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


SOCKETS = """
import os
def sockets():
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:  # the listing's own descriptor
            pass
    return count
"""
"""Open sockets of the running process (pasted into the subprocess scripts)."""


def _request() -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": "hi"}])


class _Null:
    def text(self, delta: str) -> None: ...
    def reasoning(self, delta: str) -> None: ...
    def tool_call(self, index: int, call_id: str, name: str) -> None: ...
    def tool_arguments(self, index: int, delta: str) -> None: ...


# ---- the runtime path has no SDK on it --------------------------------------------------


def test_a_first_turn_in_each_wire_api_imports_no_sdk(tmp_path: Path) -> None:
    code = f"""
import sys, talaria
from talaria.testing import ScriptedProvider, Reply
from helpers import scripted_agent
with ScriptedProvider([Reply(text="a"), Reply(text="b"), Reply(text="c")]) as server:
    for mode in {MODES!r}:
        with scripted_agent(server, __import__("pathlib").Path({str(tmp_path)!r}), mode) as agent:
            print(agent.chat("hi"))
print(sorted(m for m in sys.modules if m.split(".")[0] in ("openai", "anthropic", "httpx")))
"""
    out = _python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["a", "b", "c", "[]"]


# ---- one pool per loop, cleaned up with the loop -----------------------------------------


def test_agents_on_one_loop_share_connections(tmp_path: Path) -> None:
    """Twenty agents, one after another on one loop, send every request (each agent's model
    call, the window probe) over one keep-alive connection."""
    code = f"""
import asyncio, pathlib
from talaria.testing import ScriptedProvider, Reply
from helpers import scripted_agent

async def main(server):
    for n in range(20):
        agent = scripted_agent(server, pathlib.Path({str(tmp_path)!r}))
        await agent.achat("hi")
        await agent.aclose()

with ScriptedProvider([Reply(text=str(n)) for n in range(20)]) as server:
    asyncio.run(main(server))
    print(len(server.requests), server.connections_opened)
"""
    out = _python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["20", "1"]


def test_sync_turns_and_dropped_agents_leave_no_warnings(tmp_path: Path) -> None:
    """Synchronous agents on the process's shared loop, an `asyncio.run` per async turn, agents
    dropped without close(): nothing is printed, not even in development mode, and no socket
    stays open per agent. What stays is the shared loop's: its wake-up socket pair and the one
    keep-alive connection all its agents used (its two ends, both in this process); each
    `asyncio.run` loop closed its own connection when it ended."""
    code = f"""
import asyncio, gc, pathlib, time
from talaria.testing import ScriptedProvider, Reply
from helpers import scripted_agent
{SOCKETS}
home = pathlib.Path({str(tmp_path)!r})
with ScriptedProvider([Reply(text=str(n)) for n in range(8)]) as server:
    before = sockets()
    for mode in ("chat_completions", "anthropic_messages", "codex_responses"):
        agent = scripted_agent(server, home, mode)
        agent.chat("one"); agent.chat("two")
        del agent
        gc.collect()
    for _ in range(2):  # async use, one asyncio.run each, never closed
        agent = scripted_agent(server, home)
        asyncio.run(agent.achat("hi"))
        del agent
        gc.collect()
    deadline = time.monotonic() + 5
    while sockets() - before > 4 and time.monotonic() < deadline:
        time.sleep(0.02)  # the server's side closes once it reads the client's close
    print(sockets() - before, server.connections_opened)
"""
    out = _python(code, "-W", "error::ResourceWarning", "-X", "dev")
    assert out.returncode == 0, out.stderr
    left, opened = map(int, out.stdout.split())
    assert left <= 4
    assert opened == 3  # the shared loop's one, and one per asyncio.run
    assert "Event loop is closed" not in out.stderr
    assert "unclosed" not in out.stderr.lower()
    assert "Task was destroyed" not in out.stderr


# ---- bad URLs: one clear line -------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "kind", "words"),
    [
        ("http://127.0.0.1:99999/v1", ErrorKind.CONFIG, "99999"),
        ("http://no-such-host.invalid/v1", ErrorKind.CONNECTION, "no-such-host"),
    ],
)
def test_a_bad_base_url_is_one_clear_line(
    tmp_path: Path, url: str, kind: ErrorKind, words: str
) -> None:
    code = f"""
import pathlib
from talaria import Agent
agent = Agent(model="m", base_url={url!r}, api_key="k", home=pathlib.Path({str(tmp_path)!r}),
              toolsets=[], config={{"retry.max_attempts": 1}})
result = agent.run_conversation("hi")
print(result["turn_exit_reason"])
print(result["error"])
"""
    out = _python(code)
    assert out.returncode == 0, out.stderr
    assert "ExceptionGroup" not in out.stdout + out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 2, out.stdout
    assert lines[0] == f"failed:{kind.value}"
    assert words in lines[1]


# ---- what the providers see ----------------------------------------------------------------


async def test_azure_gets_its_key_header_and_api_version() -> None:
    with ScriptedProvider([Reply(text="ok")]) as server:
        url = server.openai_base_url + "?api-version=2024-10-21"
        client = ChatCompletionsClient("gpt", base_url=url, api_key="az-key", provider="azure")
        answer = await client.complete(_request(), _Null())
    sent = server.requests[0]
    assert answer.text == "ok"
    assert sent.path == "/v1/chat/completions?api-version=2024-10-21"
    assert sent.headers["api-key"] == "az-key"
    assert "authorization" not in sent.headers


async def test_openrouter_attribution_and_configured_headers_win() -> None:
    with ScriptedProvider([Reply(text="ok")]) as server:
        client = ChatCompletionsClient(
            "m",
            base_url=server.openai_base_url,
            api_key="or-key",
            provider="openrouter",
            default_headers={"HTTP-Referer": "https://example.org", "X-Title": "mine"},
        )
        await client.complete(_request(), _Null())
    sent = server.requests[0].headers
    assert sent["authorization"] == "Bearer or-key"
    assert (sent["http-referer"], sent["x-title"]) == ("https://example.org", "mine")
    assert sent["user-agent"].startswith("talaria/")


async def test_anthropic_gets_its_key_and_version_headers() -> None:
    with ScriptedProvider([Reply(text="ok")]) as server:
        client = AnthropicMessagesClient("claude", base_url=server.anthropic_base_url, api_key="k")
        await client.complete(_request(), _Null())
    sent = server.requests[0].headers
    assert sent["x-api-key"] == "k"
    assert sent["anthropic-version"]


async def test_an_http_error_keeps_status_body_and_retry_after() -> None:
    with ScriptedProvider([Fail(503, "busy, come back", headers={"retry-after-ms": "1500"})]) as s:
        client = ChatCompletionsClient("m", base_url=s.openai_base_url, api_key="k")
        with pytest.raises(ProviderError) as caught:
            await client.complete(_request(), _Null())
    error = caught.value
    assert (error.kind, error.status, error.retry_after) == (ErrorKind.SERVER, 503, 1.5)
    assert "busy, come back" in error.message


# ---- the SSE reader ------------------------------------------------------------------------


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def _events(*parts: bytes) -> list[Event]:
    return [event async for event in events(_chunks(*parts))]


async def test_sse_multi_line_data_comments_names_and_split_line_endings() -> None:
    found = await _events(
        b": keep-alive\r\n",
        b"event: message_start\r",
        b'\ndata: {"a":\r\ndata:  1}\r\n\r\n',
        b"data: second\n\n",
        b"data: last without blank line",
    )
    assert found == [
        Event("message_start", '{"a":\n 1}'),
        Event("", "second"),
        Event("", "last without blank line"),
    ]


async def test_sse_json_events_stop_at_done_and_raise_on_error_events() -> None:
    done = [e async for e in json_events(_chunks(b'data: {"x": 1}\n\ndata: [DONE]\n\n'))]
    assert done == [{"x": 1}]
    stream = json_events(_chunks(b'data: {"error": {"message": "overloaded", "code": 529}}\n\n'))
    with pytest.raises(Exception) as caught:
        await anext(stream)
    assert getattr(caught.value, "body", None) == {"error": {"message": "overloaded", "code": 529}}


def test_the_sse_reader_is_what_classify_expects() -> None:
    """An error event mid-stream becomes a retryable ProviderError that knows output started."""
    from talaria.providers.resilience.classify import classify_exception
    from talaria.providers.transport.sse import StreamErrorEvent

    event = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    error = classify_exception(
        StreamErrorEvent(event), provider="p", model="m", output_started=True
    )
    assert (error.kind, error.message, error.output_started) == (
        ErrorKind.OVERLOADED,
        "Overloaded",
        True,
    )


def test_cancelling_a_stream_closes_its_response() -> None:
    """A cancelled call leaves no half-read response: the next call on the loop works."""
    from talaria.testing import Stall

    async def main(server: ScriptedProvider) -> str | None:
        client = ChatCompletionsClient("m", base_url=server.openai_base_url, api_key="k")
        call = asyncio.create_task(client.complete(_request(), _Null()))
        while not server.requests:
            await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        return (await client.complete(_request(), _Null())).text

    script = [Stall(Reply(text="slow answer"), seconds=30, after_chunks=1), Reply(text="next")]
    with ScriptedProvider(script) as server:
        assert asyncio.run(main(server)) == "next"


# ---- proxies from the environment ---------------------------------------------------------


CANNED_STREAM = (
    b'data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
    b'"delta":{"role":"assistant","content":"canned"},"finish_reason":null}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
    b'"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)


@pytest.fixture
def forward_proxy() -> Iterator[list[str]]:
    """An HTTP forward proxy that answers every request itself; it records the request
    targets it was asked for (absolute URLs when a client goes through a proxy)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(CANNED_STREAM)))
            self.end_headers()
            self.wfile.write(CANNED_STREAM)

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as httpd:
        seen.append(f"http://127.0.0.1:{httpd.server_address[1]}")
        yield seen


def test_http_proxy_and_no_proxy_from_the_environment(
    forward_proxy: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = forward_proxy.pop()
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    for name in ("http_proxy", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)

    async def ask(url: str) -> str | None:
        client = ChatCompletionsClient("m", base_url=url, api_key="k")
        return (await client.complete(_request(), _Null())).text

    assert asyncio.run(ask("http://models.example/v1")) == "canned"
    assert forward_proxy == ["http://models.example/v1/chat/completions"]
    with ScriptedProvider([Reply(text="direct")]) as server:
        assert asyncio.run(ask(server.openai_base_url)) == "direct"
    assert len(forward_proxy) == 1


# ---- HTTP/2 over TLS, negotiated by ALPN --------------------------------------------------


@pytest.fixture
def h2_server(tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    """An HTTPS server that speaks HTTP/2 when the client offers it (self-signed certificate
    for 127.0.0.1); it records the protocol each connection chose."""
    import socket
    import threading

    context, cert = server_context(tmp_path)
    context.set_alpn_protocols(["h2", "http/1.1"])
    listener = socket.create_server(("127.0.0.1", 0))
    chosen: list[str] = []

    def serve() -> None:
        while True:
            try:
                raw, _ = listener.accept()
            except OSError:
                return
            with context.wrap_socket(raw, server_side=True) as tls:
                chosen.append(tls.selected_alpn_protocol() or "")
                if chosen[-1] == "h2":
                    _answer_h2(tls)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{listener.getsockname()[1]}/v1", cert, chosen
    listener.close()
    thread.join(5)


def _answer_h2(tls: Any) -> None:
    """Answer every HTTP/2 request on one connection with the canned chat stream."""
    from h2.config import H2Configuration
    from h2.connection import H2Connection
    from h2.events import DataReceived, StreamEnded

    connection = H2Connection(config=H2Configuration(client_side=False))
    connection.initiate_connection()
    tls.sendall(connection.data_to_send())
    while data := tls.recv(65535):
        for event in connection.receive_data(data):
            if isinstance(event, DataReceived):
                connection.acknowledge_received_data(len(event.data), event.stream_id)
            if isinstance(event, StreamEnded):
                headers = [(":status", "200"), ("content-type", "text/event-stream")]
                connection.send_headers(event.stream_id, headers)
                connection.send_data(event.stream_id, CANNED_STREAM, end_stream=True)
        tls.sendall(connection.data_to_send())


def test_https_speaks_http2_when_asked_and_the_server_offers_it(
    h2_server: tuple[str, Path, list[str]],
) -> None:
    url, cert, chosen = h2_server
    code = f"""
import asyncio
from talaria.core import ModelRequest
from talaria.providers.wire.chat_completions import ChatCompletionsClient
class Null:
    def text(self, d): pass
    def reasoning(self, d): pass
    def tool_call(self, i, c, n): pass
    def tool_arguments(self, i, d): pass
async def main():
    client = ChatCompletionsClient("m", base_url={url!r}, api_key="k")
    request = ModelRequest(messages=[{{"role": "user", "content": "hi"}}])
    return [(await client.complete(request, Null())).text for _ in range(2)]
print(asyncio.run(main()))
"""
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={
            **os.environ,
            "PYTHONPATH": str(REPO / "src"),
            "SSL_CERT_FILE": str(cert),
            "TALARIA_HTTP2": "1",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['canned', 'canned']"
    assert chosen == ["h2"], "two calls, one HTTP/2 connection"


HTTPS_AGENT = """
import sys
from talaria import Agent
with Agent(model="scripted-model", base_url=sys.argv[1], api_key="k", toolsets=[]) as agent:
    results = [agent.run_conversation(user_message=text) for text in ("one", "two")]
print([result["final_response"] or result["error"] for result in results])
print(sorted(name for name in ("httpcore2", "h2") if name in sys.modules))
"""
"""httpcore2 is what an httpx2 client sends with (the price catalogue imports httpx2 itself)."""


def test_https_goes_through_talarias_own_client(tmp_path: Path) -> None:
    """No HTTP library sends to a direct https:// endpoint: the TLS connection is talaria's
    own, verified against the CA the environment names (SSL_CERT_FILE)."""
    context, cert = server_context(tmp_path)
    with ScriptedProvider([text("first"), text("second")], ssl_context=context) as server:
        assert server.openai_base_url.startswith("https://")
        out = _trusting(cert, tmp_path, HTTPS_AGENT, server.openai_base_url)
        assert out.stdout.splitlines() == ["['first', 'second']", "[]"]
        assert server.invalid_requests == []


LOADS_COUNTED = (
    """
import ssl, sys, threading
made = []
create = ssl.create_default_context
def counted(*args, **kwargs):
    made.append(threading.current_thread().name)
    return create(*args, **kwargs)
ssl.create_default_context = counted
"""
    + HTTPS_AGENT
    + """
print(made)
"""
)


def test_the_ca_bundle_loads_once_in_a_thread_of_its_own_while_the_agent_assembles(
    tmp_path: Path,
) -> None:
    """An agent bound for https:// starts loading the CA bundle as it assembles (OpenSSL reads
    it mostly without the GIL); the connect waits for that one context, never makes another."""
    context, cert = server_context(tmp_path)
    with ScriptedProvider([text("first"), text("second")], ssl_context=context) as server:
        out = _trusting(cert, tmp_path, LOADS_COUNTED, server.openai_base_url)
        assert out.stdout.splitlines() == ["['first', 'second']", "[]", "['talaria-tls']"]


def _trusting(cert: Path, home: Path, program: str, url: str) -> subprocess.CompletedProcess[str]:
    """`program` run with `url`, trusting `cert` (SSL_CERT_FILE); it must exit 0."""
    out = subprocess.run(
        [sys.executable, "-c", program, url],
        env={**os.environ, "SSL_CERT_FILE": str(cert), "TALARIA_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out


def test_https_refuses_a_server_whose_certificate_is_not_trusted(tmp_path: Path) -> None:
    context, _ = server_context(tmp_path)
    with ScriptedProvider([text("never")], ssl_context=context) as server:
        out = subprocess.run(
            [sys.executable, "-c", HTTPS_AGENT, server.openai_base_url],
            env={**os.environ, "TALARIA_HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.count("CERTIFICATE_VERIFY_FAILED") == 2, out.stdout
        assert server.requests == []


# ---- the context-window probe ---------------------------------------------------------------


def test_the_window_probe_asks_each_endpoint_once_per_process() -> None:
    """Ten agents starting at once on a local server: one probe, one answer for all."""
    import json as json_module
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from talaria.providers.profiles.context_windows import fetch_endpoint_context_length

    asked: list[str] = []
    listing = json_module.dumps({"data": [{"id": "q", "max_model_len": 12_288}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            found = self.path == "/v1/models"
            self.send_response(200 if found else 404)
            self.send_header("Content-Length", str(len(listing) if found else 0))
            self.end_headers()
            if found:
                self.wfile.write(listing)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.do_GET()

        def log_message(self, format: str, *args: object) -> None:
            pass

    async def ten_at_once() -> list[int | None]:
        probes = [fetch_endpoint_context_length(url, None, "q") for _ in range(10)]
        return list(await asyncio.gather(*probes))

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as httpd:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        first = asyncio.run(ten_at_once())
        later = asyncio.run(fetch_endpoint_context_length(url, None, "q"))
    assert first == [12_288] * 10 and later == 12_288
    assert sorted(asked) == sorted(
        ["/props", "/slots", "/api/v0/models", "/api/show", "/v1/models"]
    )
