"""`talaria -p --input-format stream-json`: user messages as JSON lines on stdin, while the
agent works, as Claude Code reads them.

Each line is `{"type": "user", "message": {"role": "user", "content": ...}}`, the content a
string or a list of `{"type": "text", "text": ...}` blocks; with `"steer": true` beside
`"type"` it steers the running turn (`Agent.steer`) instead. The first message starts a turn;
one that comes while a turn runs is queued (`Agent.queue`: it runs after the turn, in order);
the process ends when stdin is closed and nothing waits. A line that is not such a message is
reported (an `error` line on stdout, one on stderr) and skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from talaria.agent import Agent
    from talaria.core import TurnResult
    from talaria.turn_stream import TurnEvents

LINE_LIMIT = 2_000_000
"""Bytes of one input line (the limit of piped stdin in the other input format)."""


class InputLineError(ValueError):
    """A stdin line that is not a user message."""


@dataclass(frozen=True, slots=True)
class UserLine:
    text: str
    steer: bool = False


def parse_line(raw: bytes) -> UserLine | None:
    """The user message of one stdin line; None for a blank line."""
    if not raw.strip():
        return None
    if len(raw) > LINE_LIMIT:
        raise InputLineError(f"a line of {len(raw)} bytes (at most {LINE_LIMIT})")
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputLineError(f"not JSON: {exc}") from None
    if not isinstance(record, dict) or record.get("type") != "user":
        raise InputLineError('expected {"type": "user", "message": {...}}')
    message = record.get("message")
    if not isinstance(message, dict) or message.get("role", "user") != "user":
        raise InputLineError('"message" must be {"role": "user", "content": ...}')
    steer = record.get("steer", False)
    if not isinstance(steer, bool):
        raise InputLineError('"steer" must be true or false')
    text = _text_of(message.get("content"))
    if not text.strip():
        raise InputLineError("the message has no text")
    return UserLine(text, steer)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InputLineError('"content" must be a string or a list of text blocks')
    texts = []
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "text":
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            raise InputLineError(f"only text blocks are read, not {kind!r}")
        if not isinstance(block.get("text"), str):
            raise InputLineError('a text block needs "text"')
        texts.append(block["text"])
    return "\n".join(texts)


class Inbox:
    """Messages from stdin's reader thread to the run loop: while a turn runs they go to the
    agent (queued or steering); between runs they wait here for the loop, in order."""

    def __init__(self, agent: Agent, loop: asyncio.AbstractEventLoop) -> None:
        self._agent = agent
        self._loop = loop
        self._lock = threading.Lock()
        self._waiting: list[UserLine] = []
        self._running = False
        self._closed = False
        self.stopped = False
        self._wake = asyncio.Event()

    def put(self, line: UserLine) -> None:
        """From any thread."""
        with self._lock:
            if self._running:
                if line.steer:
                    self._agent.steer(line.text)
                else:
                    self._agent.queue(line.text)
                return
            self._waiting.append(line)
        self._loop.call_soon_threadsafe(self._wake.set)

    def close(self) -> None:
        """Stdin has ended (from any thread)."""
        with self._lock:
            self._closed = True
        self._loop.call_soon_threadsafe(self._wake.set)

    def stop(self) -> None:
        """A signal: no further run starts (from any thread)."""
        self.stopped = True
        self.close()

    def hold(self) -> None:
        """A run starts: messages from now on go to the agent."""
        with self._lock:
            self._running = True

    def release(self) -> None:
        with self._lock:
            self._running = False

    async def next_message(self) -> str | None:
        """The message that starts the next run (the others waiting are queued behind it, and
        the inbox holds); None once stdin has ended and nothing waits."""
        while True:
            with self._lock:
                if self._waiting and not self.stopped:
                    first, *rest = self._waiting
                    self._waiting = []
                    self._running = True
                    for line in rest:
                        self._agent.queue(line.text)
                    return first.text
                if self._closed:
                    return None
                self._wake.clear()
            await self._wake.wait()


def read_lines(fd: int, on_line: Callable[[bytes], None], on_end: Callable[[], None]) -> None:
    """Every line of `fd` to `on_line` (one longer than LINE_LIMIT is cut there, and the rest
    of it skipped), then `on_end`. Reads with os.read, so a thread blocked here holds no lock
    of Python's stdin object at exit."""
    pending, skipping = b"", False
    try:
        while chunk := os.read(fd, 65536):
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                if not skipping:
                    on_line(line)
                skipping = False
            if len(pending) > LINE_LIMIT or skipping:
                if not skipping:
                    on_line(pending)  # parse_line reports it as too long
                pending, skipping = b"", True
        if pending and not skipping:
            on_line(pending)
    finally:
        on_end()


async def converse(
    agent: Agent,
    first: str,
    follow: Callable[[TurnEvents], Awaitable[TurnResult]],
    report: Callable[[TurnResult], object],
    on_error: Callable[[str], None],
    on_stop: list[Callable[[], None]],
) -> TurnResult | None:
    """Run the messages of stdin (after `first`, the prompt of the command line, if any):
    one run per message that comes while none runs (queued messages run inside it), each
    `report`ed as it ends; a signal (which calls `on_stop`'s functions) ends the runs. The last
    result; None when no message came."""
    inbox = Inbox(agent, asyncio.get_running_loop())
    on_stop.append(inbox.stop)
    if first.strip():
        inbox.put(UserLine(first))

    def on_line(raw: bytes) -> None:
        try:
            line = parse_line(raw)
            if line is not None:
                inbox.put(line)
        except Exception as exc:  # a bad line is reported; the lines after it still count
            on_error(f"stdin line skipped: {exc}")

    reader = threading.Thread(
        target=read_lines, args=(sys.stdin.fileno(), on_line, inbox.close), daemon=True
    )
    reader.start()
    last = None
    while not inbox.stopped:
        if agent.queued_messages:  # queued just as the last run ended
            inbox.hold()
            turn = agent.queued_events()
        else:
            message = await inbox.next_message()
            if message is None:
                break
            turn = agent.events(message)
        try:
            last = await follow(turn)
        finally:
            inbox.release()
        report(last)
    return last
