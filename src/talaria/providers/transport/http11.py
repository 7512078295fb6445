"""HTTP/1.1 on asyncio streams, for model servers reached directly over ``http://`` or
``https://`` (TLS from the standard library's `ssl`).

Local servers (Ollama, llama.cpp, vLLM, LM Studio) and in-cluster endpoints are where a step's
client cost shows: their answers come back in milliseconds. This client writes the request in one
call and reads the answer with a handful of stream reads per chunk, about a seventh of a general
HTTP stack's CPU per step (``bench/transport.py``), and importing it costs nothing beyond asyncio,
which is what keeps a process's start to its first request near a bare interpreter's, over TLS
too. Connections are kept alive per host and reused; proxies and HTTP/2 (``TALARIA_HTTP2=1``)
stay with httpx2 (`talaria.providers.transport.http` chooses).

What it implements of RFC 9112: Content-Length, chunked and close-delimited bodies, informational
(1xx) answers skipped, keep-alive unless either side says ``close``, gzip/deflate decoded if a
server compresses although asked not to. A request on a reused connection that the server had
already closed is sent once more on a new one; any other failure is an error for the caller's
retry policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import ssl
import threading
import zlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

from talaria.providers.transport.drain import Drains, read_to_end
from talaria.providers.transport.sent import request_sent

MAX_HEAD = 64 * 1024
"""Bytes of status line and headers accepted before the answer is called malformed."""
MAX_IDLE_PER_HOST = 100
READ_SIZE = 64 * 1024
HAPPY_EYEBALLS_DELAY = 0.25
"""Seconds before the next address of a host is tried in parallel (RFC 8305's default)."""
_NO_BODY = frozenset({204, 304})
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""What a header name may consist of (RFC 9110 token)."""


class RemoteProtocolError(ConnectionError):
    """The server broke HTTP/1.1: closed the connection early, sent a malformed head or chunk."""


class ConnectFailedError(OSError):
    """Every address of the host refused or failed; one line instead of an exception group."""


class InvalidHeaderError(ValueError):
    """A request header that cannot be sent (a line break in it would split the request)."""


_tls_lock = threading.Lock()
_tls_context: ssl.SSLContext | None = None


def shared_ssl_context() -> ssl.SSLContext:
    """One verified TLS context per process: loading the CA bundle costs tens of ms and close
    to a megabyte, which every agent used to pay (twice) on its first turn."""
    global _tls_context
    with _tls_lock:
        if _tls_context is None:
            _tls_context = ssl.create_default_context()
        return _tls_context


def load_ssl_context_soon() -> None:
    """Start loading the CA bundle in a thread of its own: OpenSSL reads it mostly without the
    GIL, so an agent bound for an ``https://`` endpoint builds the rest of its first request
    meanwhile instead of waiting for the bundle at the connect (`shared_ssl_context` waits for
    the thread if it has not finished)."""
    if _tls_context is None:
        threading.Thread(target=shared_ssl_context, name="talaria-tls", daemon=True).start()


@dataclass(frozen=True, slots=True)
class Target:
    """Where a request goes: ``host`` as written in the URL (no brackets), ``path`` with query;
    ``secure``: over TLS (`https://`)."""

    host: str
    port: int
    path: str
    secure: bool = False

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == (443 if self.secure else 80) else f"{host}:{self.port}"


class _Connection:
    """One socket, with a read deadline: a single timer per connection that re-arms itself
    (a timeout context per read would cost more than the read)."""

    __slots__ = ("deadline", "loop", "reader", "reused", "timed_out", "timer", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reused = False
        self.loop = asyncio.get_running_loop()
        self.deadline = math.inf
        self.timer: asyncio.TimerHandle | None = None
        self.timed_out = False

    def expect(self, seconds: float) -> None:
        """The next bytes must come within ``seconds``, or the connection is aborted. The
        timer moves earlier when this request's limit ends before the one it was armed for (a
        short request on a connection a long one used before)."""
        self.deadline = self.loop.time() + seconds
        if self.timer is not None and self.timer.when() > self.deadline:
            self.timer.cancel()
            self.timer = None
        if self.timer is None:
            self.timer = self.loop.call_at(self.deadline, self._check)

    def rest(self) -> None:
        """Nothing is awaited now (idle in the pool, or between answers)."""
        self.deadline = math.inf

    def _check(self) -> None:
        self.timer = None
        if self.deadline == math.inf:
            return
        if self.loop.time() < self.deadline:
            self.timer = self.loop.call_at(self.deadline, self._check)
            return
        self.timed_out = True
        self.writer.transport.abort()  # the pending read ends; the reader says it timed out

    def usable(self) -> bool:
        """Still open at our end and not closed by the server while it sat idle."""
        return not self.writer.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.writer.close()


class Http11Pool:
    """Keep-alive connections per (host, port) for one event loop."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._drains = Drains()

    async def send(
        self,
        method: str,
        target: Target,
        headers: Mapping[str, str],
        content: bytes | None,
        seconds: float,
    ) -> Answer:
        """Send the request and read the answer's head; the body is read through the `Answer`."""
        request = _encode_request(method, target, headers, content)
        while True:
            connection = self._checkout(target) or await self._drained_or_new(target, seconds)
            try:
                connection.expect(seconds)
                connection.writer.write(request)
                await connection.writer.drain()
                request_sent()
                status, answer_headers, persistent = await _read_head(connection.reader)
                framing = _framing(method, status, answer_headers)
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                connection.close()
                if connection.timed_out:
                    raise TimeoutError(
                        f"{target.authority} sent no answer in {seconds:g} s"
                    ) from None
                if connection.reused and _nothing_read(exc):
                    continue  # the server had closed it while idle: the request never arrived
                raise _broken(target, exc) from exc
            except BaseException:
                connection.close()
                raise
            keep_alive = persistent and framing != "close"
            return Answer(
                self, target, connection, framing, status, answer_headers, seconds, keep_alive
            )

    def _checkout(self, target: Target) -> _Connection | None:
        idle = self._idle.get((target.host, target.port))
        while idle:
            connection = idle.pop()
            if connection.usable():
                connection.reused = True
                return connection
            connection.close()
        return None

    async def _drained_or_new(self, target: Target, seconds: float) -> _Connection:
        """A connection whose last answer is being drained (usually a moment from done: the
        body's end follows its last event), else a new one."""
        await self._drains.settle((target.host, target.port))
        return self._checkout(target) or await _connect(target, seconds)

    def drain(self, target: Target, connection: _Connection, rest: AsyncIterator[bytes]) -> None:
        """Read the unread end of an answer in the background, then reuse the connection
        (closed instead if the end is long or slow to come)."""
        self._drains.start((target.host, target.port), self._drained(target, connection, rest))

    async def _drained(
        self, target: Target, connection: _Connection, rest: AsyncIterator[bytes]
    ) -> None:
        complete = False
        try:
            complete = await read_to_end(rest)
        finally:  # also when cancelled, as the loop's pool closes
            if complete:
                self.checkin(target, connection)
            else:
                connection.close()

    def checkin(self, target: Target, connection: _Connection) -> None:
        connection.rest()
        idle = self._idle.setdefault((target.host, target.port), [])
        if connection.usable() and len(idle) < MAX_IDLE_PER_HOST:
            idle.append(connection)
        else:
            connection.close()

    async def aclose(self) -> None:
        await self._drains.aclose()
        connections = [connection for idle in self._idle.values() for connection in idle]
        self._idle.clear()
        for connection in connections:
            connection.close()
        for connection in connections:
            with contextlib.suppress(Exception):
                await connection.writer.wait_closed()


class Answer:
    """An answer whose head has arrived; the body streams through `aiter_bytes` (once)."""

    def __init__(
        self,
        pool: Http11Pool,
        target: Target,
        connection: _Connection,
        framing: str | int,
        status: int,
        headers: dict[str, str],
        seconds: float,
        keep_alive: bool,
    ) -> None:
        self.status_code = status
        self.headers = headers
        self._pool = pool
        self._target = target
        self._connection: _Connection | None = connection
        self._seconds = seconds
        self._framing = framing
        self._keep_alive = keep_alive
        self._raw: AsyncIterator[bytes] | None = None
        self._between_reads = True
        """False while a read is under way: a body left there cannot be resumed."""

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive, decoded from chunked and gzip/deflate."""
        connection = self._connection
        if connection is None or self._raw is not None:
            raise RemoteProtocolError("the answer's body was already read or closed")
        decoder = _decoder(self.headers.get("content-encoding", ""))
        self._raw = raw_body = _body(connection, self._framing, self._seconds)
        try:
            self._between_reads = False
            async for raw in raw_body:
                self._between_reads = True
                data = decoder.decompress(raw) if decoder else raw
                if data:
                    yield data
                self._between_reads = False
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError) as exc:
            if connection.timed_out:
                authority, seconds = self._target.authority, self._seconds
                raise TimeoutError(f"{authority} sent nothing for {seconds:g} s") from None
            raise _broken(self._target, exc) from exc
        if decoder and (tail := decoder.flush()):
            yield tail
        self._connection = None
        if self._keep_alive:
            self._pool.checkin(self._target, connection)
        else:
            connection.close()

    async def aread(self) -> bytes:
        return b"".join([chunk async for chunk in self.aiter_bytes()])

    async def aclose(self) -> None:
        """Give the connection back if the body was read to its end. A reader that stopped at
        the stream's last event (``[DONE]``, ``message_stop``) leaves only the body's end
        unread: that is read in the background, and then the connection is reused."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if not (self._keep_alive and self._between_reads and connection.usable()):
            connection.close()
            return
        rest = self._raw or _body(connection, self._framing, self._seconds)
        self._pool.drain(self._target, connection, rest)


async def _connect(target: Target, seconds: float) -> _Connection:
    try:
        async with asyncio.timeout(seconds):
            reader, writer = await asyncio.open_connection(
                target.host,
                target.port,
                happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY,
                limit=MAX_HEAD,
                ssl=shared_ssl_context() if target.secure else None,
                server_hostname=target.host if target.secure else None,
            )
    except TimeoutError:
        raise TimeoutError(f"connecting to {target.authority} took over {seconds:g} s") from None
    except OSError as exc:
        raise ConnectFailedError(f"cannot connect to {target.authority}: {exc}") from exc
    return _Connection(reader, writer)


def _encode_request(
    method: str, target: Target, headers: Mapping[str, str], content: bytes | None
) -> bytes:
    lines = [f"{method} {target.path} HTTP/1.1", f"Host: {target.authority}"]
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name) or _breaks_line(value):
            raise InvalidHeaderError(f"header {name!r} cannot be sent: {value[:80]!r}")
        lines.append(f"{name}: {value}")
    if not any(name.lower() == "accept-encoding" for name in headers):
        lines.append("Accept-Encoding: identity")  # bodies stream as they are made
    if content is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(content or b'')}")
    try:
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    except UnicodeEncodeError as exc:
        raise InvalidHeaderError(f"a request header is not Latin-1 text: {exc}") from None
    return head + content if content else head


def _breaks_line(value: str) -> bool:
    return "\r" in value or "\n" in value or "\0" in value


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bool]:
    """Status, headers (names lowercased, repeats joined with commas) and whether the server
    keeps the connection open after this answer; 1xx answers skipped."""
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise RemoteProtocolError(f"answer head over {MAX_HEAD} bytes") from None
        status_line, *header_lines = head.decode("latin-1").split("\r\n")[:-2]
        version, status = _status(status_line)
        if 100 <= status < 200:
            continue
        headers: dict[str, str] = {}
        for line in header_lines:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise RemoteProtocolError(f"malformed header line: {line[:80]!r}")
            name, value = name.lower(), value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        connection = _tokens(headers.get("connection", ""))
        persistent = (
            "keep-alive" in connection if version == "HTTP/1.0" else "close" not in connection
        )
        return status, headers, persistent


def _status(line: str) -> tuple[str, int]:
    version, _, rest = line.partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise RemoteProtocolError(f"not an HTTP/1.1 answer: {line[:80]!r}")
    return version, int(code)


def _framing(method: str, status: int, headers: Mapping[str, str]) -> str | int:
    """How the body ends: its length, ``"chunked"``, or ``"close"`` (at end of stream)."""
    if method == "HEAD" or status in _NO_BODY:
        return 0
    if "transfer-encoding" in headers:
        if _tokens(headers["transfer-encoding"])[-1:] == ["chunked"]:
            return "chunked"
        return "close"
    length = headers.get("content-length")
    if length is None:
        return "close"
    if not length.isdigit():
        raise RemoteProtocolError(f"bad Content-Length: {length[:40]!r}")
    return int(length)


def _tokens(value: str) -> list[str]:
    return [token.strip().lower() for token in value.split(",") if token.strip()]


async def _body(
    connection: _Connection, framing: str | int, seconds: float
) -> AsyncIterator[bytes]:
    reader = connection.reader
    if framing == "chunked":
        async for chunk in _chunks(connection, seconds):
            yield chunk
        return
    remaining = framing if isinstance(framing, int) else -1
    while remaining:
        connection.expect(seconds)
        data = await reader.read(READ_SIZE if remaining < 0 else min(remaining, READ_SIZE))
        if not data:
            if connection.timed_out:
                raise TimeoutError("read timed out")
            if remaining > 0:
                raise RemoteProtocolError(f"the answer ended {remaining} bytes short")
            return
        remaining = remaining - len(data) if remaining > 0 else remaining
        yield data


async def _chunks(connection: _Connection, seconds: float) -> AsyncIterator[bytes]:
    reader = connection.reader
    while True:
        connection.expect(seconds)
        size = _chunk_size(await reader.readuntil(b"\r\n"))
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailer fields: nothing a model client needs
            return
        chunk = await reader.readexactly(size + 2)
        if chunk[-2:] != b"\r\n":
            raise RemoteProtocolError("a chunk did not end where its size said")
        yield chunk[:-2]


def _chunk_size(line: bytes) -> int:
    digits = line.split(b";", 1)[0].strip()
    try:
        return int(digits, 16)
    except ValueError:
        raise RemoteProtocolError(f"bad chunk size: {line[:40]!r}") from None


def _decoder(encoding: str) -> zlib._Decompress | None:
    coding = encoding.strip().lower()
    if coding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if coding == "deflate":
        return zlib.decompressobj()
    if coding in ("", "identity"):
        return None
    raise RemoteProtocolError(f"unsupported Content-Encoding: {encoding[:40]!r}")


def _nothing_read(exc: BaseException) -> bool:
    """The connection failed before the server said anything (it was already closed)."""
    if isinstance(exc, asyncio.IncompleteReadError):
        return not exc.partial
    return isinstance(exc, ConnectionResetError | BrokenPipeError)


def _broken(target: Target, exc: BaseException) -> RemoteProtocolError:
    if isinstance(exc, RemoteProtocolError):
        return exc
    if isinstance(exc, asyncio.IncompleteReadError):
        return RemoteProtocolError(f"{target.authority} closed the connection mid-answer")
    return RemoteProtocolError(f"connection to {target.authority} failed: {exc}")
