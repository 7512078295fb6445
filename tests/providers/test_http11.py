"""talaria's own HTTP/1.1 client (plain ``http://`` model servers), against a raw socket server
that answers the way real servers do, and the ways broken ones do: every body framing,
keep-alive connections the server drops, answers cut off, stalls, malformed heads, proxies.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any

import pytest

from talaria.providers.errors import ErrorKind
from talaria.providers.resilience.classify import classify_exception
from talaria.providers.transport import http, sse
from talaria.providers.transport.http11 import (
    ConnectFailedError,
    InvalidHeaderError,
    RemoteProtocolError,
)
from talaria.providers.transport.sent import when_sent

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, "Seen"], Awaitable[None]]


class Seen:
    """What the server received: connections opened and the requests' heads and bodies."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[tuple[str, dict[str, str], bytes]] = []


async def read_request(reader: asyncio.StreamReader, seen: Seen) -> bool:
    """One request off the connection into ``seen``; False at end of stream."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return False
    line, *rest = head.decode("latin-1").split("\r\n")[:-2]
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in rest)}
    body = await reader.readexactly(int(headers.get("content-length", 0)))
    seen.requests.append((line, headers, body))
    return True


async def serving(handler: Handler, run: Callable[[str, Seen], Awaitable[Any]]) -> Any:
    seen = Seen()

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.connections += 1
        try:
            await handler(reader, writer, seen)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # the test is over; Python 3.11's stream server logs a cancelled handler
        finally:
            writer.close()

    server = await asyncio.start_server(connected, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        return await run(f"http://127.0.0.1:{port}", seen)
    finally:
        server.close()


def answering(*answers: bytes, keep_open: bool = True) -> Handler:
    """A server that answers each request on a connection with the next of ``answers``."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: Seen):
        for answer in answers:
            if not await read_request(reader, seen):
                return
            writer.write(answer)
            await writer.drain()
        if keep_open:
            await reader.read()  # until the client closes

    return handler


def chunked(*parts: bytes, extra: bytes = b"") -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts)
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        + extra
        + b"\r\n"
        + body
        + b"0\r\n\r\n"
    )


def sized(body: bytes, status: bytes = b"200 OK", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Length: %d\r\n%s\r\n%s" % (status, len(body), extra, body)


async def fetch(url: str, **options: Any) -> Any:
    return await http.json_answer("POST", url + "/v1/chat", {}, body={"q": 1}, **options)


async def stream(url: str) -> list[bytes]:
    async with http.post_json(url + "/v1/chat", {"q": 1}, {}) as answer:
        return [chunk async for chunk in answer.aiter_bytes()]


def kind_of(exc: BaseException) -> ErrorKind:
    return classify_exception(exc, provider="p", model="m").kind


# ---- bodies: every framing a server uses -----------------------------------------------


def test_each_body_framing_arrives_whole_on_one_kept_alive_connection() -> None:
    answers = [
        sized(b'{"a": 1}'),
        chunked(b'{"b"', b": 2}"),
        chunked(b'{"c": 3}', extra=b"Trailer: x\r\n").replace(b"0\r\n\r\n", b"0\r\nx: y\r\n\r\n"),
        b"HTTP/1.1 100 Continue\r\n\r\n" + sized(b'{"d": 4}'),
        sized(gzip.compress(b'{"e": 5}'), extra=b"Content-Encoding: gzip\r\n"),
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b'{"f": 6}',
    ]

    async def run(url: str, seen: Seen) -> tuple[list[Any], Seen]:
        return [await fetch(url) for _ in answers], seen

    bodies, seen = asyncio.run(serving(answering(*answers, keep_open=False), run))
    assert bodies == [{"a": 1}, {"b": 2}, {"c": 3}, {"d": 4}, {"e": 5}, {"f": 6}]
    assert seen.connections == 1
    line, headers, body = seen.requests[0]
    assert line == "POST /v1/chat HTTP/1.1"
    assert headers["host"].startswith("127.0.0.1:")
    assert headers["content-type"] == "application/json"
    assert headers["accept-encoding"] == "identity"
    assert body == b'{"q":1}'


def test_a_streamed_body_arrives_chunk_by_chunk() -> None:
    events = [b'data: {"n": %d}\n\n' % n for n in range(5)]

    async def run(url: str, seen: Seen) -> list[bytes]:
        return await stream(url)

    assert asyncio.run(serving(answering(chunked(*events)), run)) == events


def test_the_loop_hears_that_the_request_is_on_its_way_before_any_answer_comes() -> None:
    told = asyncio.Event()

    async def answers_once_told(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: Seen
    ) -> None:
        await read_request(reader, seen)
        await asyncio.wait_for(told.wait(), 30)  # no answer before the client said it sent
        writer.write(sized(b'{"a": 1}'))
        await writer.drain()

    async def run(url: str, seen: Seen) -> Any:
        with when_sent(told.set):
            return await fetch(url)

    assert asyncio.run(serving(answers_once_told, run)) == {"a": 1}


def test_query_parameters_and_headers_are_sent_as_given() -> None:
    async def run(url: str, seen: Seen) -> Any:
        await http.json_answer(
            "GET", url + "/models?x=1", {"api-key": "k", "X_Odd": "v"}, params={"api-version": "2"}
        )
        return seen.requests[0]

    line, headers, body = asyncio.run(serving(answering(sized(b"{}")), run))
    assert line == "GET /models?x=1&api-version=2 HTTP/1.1"
    assert (headers["api-key"], headers["x_odd"], body) == ("k", "v", b"")


# ---- keep-alive: connections the server drops ------------------------------------------


def test_a_kept_alive_connection_the_server_closed_is_replaced_and_the_request_sent_once() -> None:
    async def one_answer_then_close(reader, writer, seen: Seen) -> None:
        if await read_request(reader, seen):
            writer.write(sized(b'{"n": %d}' % len(seen.requests)))
            await writer.drain()

    async def run(url: str, seen: Seen) -> list[Any]:
        first = await fetch(url)
        await asyncio.sleep(0.05)  # the server's close reaches the idle connection
        second = await fetch(url)
        return [first, second, seen.connections, len(seen.requests)]

    assert asyncio.run(serving(one_answer_then_close, run)) == [{"n": 1}, {"n": 2}, 2, 2]


def test_a_server_that_closes_without_answering_a_reused_connection_gets_one_resend() -> None:
    """The race a keep-alive client cannot avoid: the server closes the idle connection just as
    the next request goes out. The request is resent once on a new connection."""
    answered = 0

    async def flaky(reader, writer, seen: Seen) -> None:
        nonlocal answered
        while await read_request(reader, seen):
            if answered == 1 and seen.connections == 1:
                return  # read the second request and hang up without a word
            answered += 1
            writer.write(sized(b'{"n": %d}' % answered))
            await writer.drain()

    async def run(url: str, seen: Seen) -> list[Any]:
        return [await fetch(url), await fetch(url), seen.connections, len(seen.requests)]

    assert asyncio.run(serving(flaky, run)) == [{"n": 1}, {"n": 2}, 2, 3]


def test_an_http_1_0_answer_closes_its_connection_unless_it_says_keep_alive() -> None:
    old_style = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    kept = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}"

    async def old_server(reader, writer, seen: Seen) -> None:
        while await read_request(reader, seen):
            writer.write(kept if len(seen.requests) > 1 else old_style)
            await writer.drain()

    async def run(url: str, seen: Seen) -> list[Any]:
        for _ in range(4):
            await fetch(url)
        return [seen.connections, len(seen.requests)]

    # the first answer closes its connection; the second says keep-alive, so 3 and 4 reuse it
    assert asyncio.run(serving(old_server, run)) == [2, 4]


def test_a_stream_read_up_to_its_last_event_keeps_its_connection() -> None:
    """The wire clients stop at ``[DONE]`` (or ``message_stop``), before the body's own end:
    the rest is read in the background and the next request reuses the connection."""
    answer = chunked(b'data: {"n": 1}\n\n', b"data: [DONE]\n\n")

    async def run(url: str, seen: Seen) -> list[Any]:
        got = []
        for _ in range(3):
            async with (
                http.post_json(url + "/v1/chat", {"q": 1}, {}) as streamed,
                aclosing(sse.json_events(streamed.aiter_bytes())) as events,
            ):
                got += [event async for event in events]
        return [got, seen.connections, len(seen.requests)]

    assert asyncio.run(serving(answering(answer, answer, answer), run)) == [[{"n": 1}] * 3, 1, 3]


def test_an_answer_left_unread_closes_its_connection_instead_of_reusing_it() -> None:
    half = chunked(b"data: 1\n\n")[:-5]  # the first chunk, then nothing more

    async def first_half_then_whole(reader, writer, seen: Seen) -> None:
        while await read_request(reader, seen):
            writer.write(half if len(seen.requests) == 1 else sized(b'{"whole": true}'))
            await writer.drain()

    async def run(url: str, seen: Seen) -> list[Any]:
        async with http.post_json(url + "/v1/chat", {"q": 1}, {}) as answer:
            assert answer.status_code == 200  # the body is never read
        return [await fetch(url), seen.connections]

    assert asyncio.run(serving(first_half_then_whole, run)) == [{"whole": True}, 2]


# ---- failures: one clear error each, of the kind the retry policy expects -----------------


def test_an_answer_cut_off_mid_body_is_a_connection_error() -> None:
    async def run(url: str, seen: Seen) -> BaseException:
        with pytest.raises(RemoteProtocolError) as caught:
            await fetch(url)
        return caught.value

    cut = sized(b'{"a": "long answer"}')[:-6]
    error = asyncio.run(serving(answering(cut, keep_open=False), run))
    assert "6 bytes short" in str(error)
    assert kind_of(error) is ErrorKind.CONNECTION


def test_a_stream_cut_off_between_chunks_is_a_connection_error() -> None:
    async def run(url: str, seen: Seen) -> BaseException:
        with pytest.raises(RemoteProtocolError) as caught:
            await stream(url)
        return caught.value

    cut = chunked(b"data: 1\n\n", b"data: 2\n\n")[:-5]
    error = asyncio.run(serving(answering(cut, keep_open=False), run))
    assert "closed the connection mid-answer" in str(error)
    assert kind_of(error) is ErrorKind.CONNECTION


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "not an HTTP/1.1 answer"),
        (b"HTTP/1.1 200 OK\r\nbad header\r\n\r\n", "malformed header line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: lots\r\n\r\n", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
        (b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 2\r\n\r\nxx", "br"),
    ],
)
def test_a_malformed_answer_is_one_clear_error(answer: bytes, message: str) -> None:
    async def run(url: str, seen: Seen) -> BaseException:
        with pytest.raises(RemoteProtocolError) as caught:
            await fetch(url)
        return caught.value

    assert message in str(asyncio.run(serving(answering(answer), run)))


def test_a_head_larger_than_the_limit_is_refused() -> None:
    async def run(url: str, seen: Seen) -> BaseException:
        with pytest.raises(RemoteProtocolError) as caught:
            await fetch(url)
        return caught.value

    huge = b"HTTP/1.1 200 OK\r\nX-Junk: " + b"j" * 70_000 + b"\r\n\r\n"
    assert "answer head over" in str(asyncio.run(serving(answering(huge), run)))


async def answered_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: Seen):
    """The first request of a connection (the default limit, 600 s) is answered at once, so
    a test that times the second one on the kept-alive connection times the server alone, not
    a connect on a busy machine, and its shorter limit must replace the longer one's timer."""
    await read_request(reader, seen)
    writer.write(sized(b"{}"))
    await writer.drain()
    await read_request(reader, seen)


def test_a_server_that_never_answers_times_out_with_the_limit_named() -> None:
    async def silent(reader, writer, seen: Seen) -> None:
        await answered_once(reader, writer, seen)
        await reader.read()

    async def run(url: str, seen: Seen) -> BaseException:
        await fetch(url)
        with pytest.raises(TimeoutError) as caught:
            await fetch(url, seconds=0.3)
        assert seen.connections == 1
        return caught.value

    error = asyncio.run(serving(silent, run))
    assert "sent no answer in 0.3 s" in str(error)
    assert kind_of(error) is ErrorKind.TIMEOUT


def test_a_stream_that_stalls_times_out() -> None:
    async def stalls(reader, writer, seen: Seen) -> None:
        await answered_once(reader, writer, seen)
        writer.write(chunked(b"data: 1\n\n")[:-5])
        await reader.read()

    async def run(url: str, seen: Seen) -> BaseException:
        await fetch(url)
        with pytest.raises(TimeoutError) as caught:
            async with http.post_json(url + "/x", {}, {}, seconds=0.3) as answer:
                async for _ in answer.aiter_bytes():
                    pass
        assert seen.connections == 1
        return caught.value

    assert "sent nothing for 0.3 s" in str(asyncio.run(serving(stalls, run)))


def test_a_refused_connection_names_the_address() -> None:
    async def run() -> BaseException:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(ConnectFailedError) as caught:
            await fetch(f"http://127.0.0.1:{port}")
        return caught.value

    error = asyncio.run(run())
    assert str(error).startswith("cannot connect to 127.0.0.1:")
    assert kind_of(error) is ErrorKind.CONNECTION


def test_a_header_with_a_line_break_is_refused_before_anything_is_sent() -> None:
    async def run(url: str, seen: Seen) -> list[Any]:
        with pytest.raises(InvalidHeaderError) as caught:
            await http.json_answer("GET", url + "/", {"X-Key": "a\r\nX-Injected: 1"})
        return [caught.value, seen.requests]

    error, requests = asyncio.run(serving(answering(sized(b"{}")), run))
    assert requests == []
    assert "'X-Key' cannot be sent" in str(error)
    assert kind_of(error) is ErrorKind.CONFIG


# ---- proxies: httpx2 takes plain HTTP when one is configured -----------------------------


def test_a_configured_proxy_receives_plain_http_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy is the raw server: it sees the request in absolute form and answers itself."""

    async def run(proxy: str, seen: Seen) -> list[Any]:
        monkeypatch.setenv("HTTP_PROXY", proxy)
        answer = await http.json_answer("GET", "http://model.invalid:8080/v1/models", {})
        return [answer, seen.requests[0][0]]

    answer, line = asyncio.run(serving(answering(sized(b'{"via": "proxy"}')), run))
    assert answer == {"via": "proxy"}
    assert line == "GET http://model.invalid:8080/v1/models HTTP/1.1"


def test_streams_through_a_proxy_keep_their_connection_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx2 (which takes proxied and https requests) would close an HTTP/1.1 connection whose
    stream was read only up to ``[DONE]``; talaria reads the end for it, so three streamed
    calls through the proxy use one connection."""
    answer = chunked(b'data: {"n": 1}\n\n', b"data: [DONE]\n\n")

    async def run(proxy: str, seen: Seen) -> list[Any]:
        monkeypatch.setenv("HTTP_PROXY", proxy)
        got = []
        for _ in range(3):
            async with (
                http.post_json("http://model.invalid/v1/chat", {"q": 1}, {}) as streamed,
                aclosing(sse.json_events(streamed.aiter_bytes())) as events,
            ):
                got += [event async for event in events]
        return [got, seen.connections, [line for line, _, _ in seen.requests]]

    got, connections, lines = asyncio.run(serving(answering(answer, answer, answer), run))
    assert got == [{"n": 1}] * 3
    assert connections == 1
    assert lines == ["POST http://model.invalid/v1/chat HTTP/1.1"] * 3
