"""Per-step cost of the HTTP client alone: the same 40-step streamed tool loop, no agent.

Each client posts the growing Chat Completions history to the scripted provider (its own
process, zero delay), reads the SSE answer and appends the tool call and its result, like an
agent's loop without the agent. Clients: httpx 0.28, httpx2, talaria's own transport (on
whichever library it uses) and a raw asyncio floor (hand-written HTTP/1.1 on one keep-alive
socket: the least any client can cost on this machine). Median of interleaved rounds, in
wall time and in this process's CPU time (the client's own cost; on a busy machine CPU time
moves far less than wall time).

Run: python bench/transport.py [--steps 40] [--reps 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from common import (
    MODEL,
    NOOP_SCHEMA,
    ProviderProcess,
    Row,
    first_tool_call,
    median,
    report,
    tool_loop_plan,
)

Post = Callable[[dict[str, Any]], AsyncIterator[bytes]]
"""Send one body, yield the answer's raw SSE lines."""


async def _turn(post: Post, steps: int) -> int:
    """One tool loop to the final answer; the number of model calls it made."""
    tools = [{"type": "function", "function": NOOP_SCHEMA}]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful agent."},
        {"role": "user", "content": f"steps={steps}"},
    ]
    calls = 0
    while True:
        body = {"model": MODEL, "messages": messages, "stream": True, "tools": tools}
        calls += 1
        call = first_tool_call([line.decode() async for line in post(body)])
        if call is None:
            return calls
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "ok"})


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def httpx_like(module: Any, url: str) -> tuple[Post, Callable[[], Awaitable[None]]]:
    """httpx 0.28 and httpx2 share an API: one AsyncClient, streamed POSTs."""
    client = module.AsyncClient(base_url=url, headers={"Authorization": "Bearer x"})

    async def post(body: dict[str, Any]) -> AsyncIterator[bytes]:
        async with client.stream(
            "POST",
            "/chat/completions",
            content=_encode(body),
            headers={"Content-Type": "application/json"},
        ) as response:
            async for line in response.aiter_lines():
                yield line.encode()

    return post, client.aclose


def talaria_transport(url: str) -> tuple[Post, Callable[[], Awaitable[None]]]:
    """talaria's transport: the shared pool and its SSE reader (events back to lines, for
    the common loop; the cost of that is a few microseconds)."""
    from talaria.providers.transport import http, sse

    async def post(body: dict[str, Any]) -> AsyncIterator[bytes]:
        async with http.post_json(
            f"{url}/chat/completions", body, {"Authorization": "Bearer x"}
        ) as response:
            async for event in sse.events(response.aiter_bytes()):
                yield b"data: " + event.data.encode()

    async def close() -> None:
        return None

    return post, close


def raw_asyncio(url: str) -> tuple[Post, Callable[[], Awaitable[None]]]:
    """The floor: HTTP/1.1 by hand on one asyncio stream (chunked answers only)."""
    parts = urlsplit(url)
    connection: list[Any] = []

    async def post(body: dict[str, Any]) -> AsyncIterator[bytes]:
        if not connection:
            connection.extend(await asyncio.open_connection(parts.hostname, parts.port))
        reader, writer = connection
        payload = _encode(body)
        head = (
            f"POST {parts.path}/chat/completions HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Authorization: Bearer x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n"
        )
        writer.write(head.encode() + payload)
        await reader.readuntil(b"\r\n\r\n")
        pending = b""
        while True:
            size = int((await reader.readline()).strip(), 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            pending += chunk[:-2]
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line

    async def close() -> None:
        if connection:
            connection[1].close()
            await connection[1].wait_closed()

    return post, close


def _clients() -> dict[str, Callable[[str], tuple[Post, Callable[[], Awaitable[None]]]]]:
    import httpx
    import httpx2

    return {
        "raw asyncio (floor)": raw_asyncio,
        "httpx 0.28": lambda url: httpx_like(httpx, url),
        "httpx2": lambda url: httpx_like(httpx2, url),
        "talaria transport": talaria_transport,
    }


async def _measure(url: str, steps: int, reps: int) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) seconds per step for each client, rounds interleaved so drift hits all."""
    made = {name: factory(url) for name, factory in _clients().items()}
    per_step: dict[str, list[tuple[float, float]]] = {name: [] for name in made}
    for post, _ in made.values():
        await _turn(post, 2)  # connect and warm up
    for _ in range(reps):
        for name, (post, _) in made.items():
            start, cpu = time.perf_counter(), time.process_time()
            calls = await _turn(post, steps)
            if calls != steps:
                raise RuntimeError(f"{name}: {calls} model calls, planned {steps}")
            wall, used = time.perf_counter() - start, time.process_time() - cpu
            per_step[name].append((wall / steps, used / steps))
    for _, close in made.values():
        await close()
    return per_step


def run(steps: int = 40, reps: int = 7) -> list[Row]:
    with ProviderProcess(tool_loop_plan(steps)) as provider:
        per_step = asyncio.run(_measure(provider.url, steps, reps))
    floor = per_step["raw asyncio (floor)"]
    rows = [
        Row(f"{name}, per step", median([w for w, _ in times]), None, median([w for w, _ in floor]))
        for name, times in per_step.items()
    ]
    rows += [
        Row(
            f"{name}, CPU per step",
            median([c for _, c in times]),
            None,
            median([c for _, c in floor]),
        )
        for name, times in per_step.items()
    ]
    report(
        "transport",
        f"HTTP client per step ({steps}-step streamed tool loop)",
        rows,
        {"steps": steps, "reps": reps},
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    run(args.steps, args.reps)


if __name__ == "__main__":
    main()
