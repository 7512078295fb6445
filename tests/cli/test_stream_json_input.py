"""`talaria -p --input-format stream-json` in a real subprocess against the scripted provider:
user messages as JSON lines on stdin while a turn runs are queued (run after it, in order),
a line with "steer": true reaches the running turn's next model call, a bad line is reported
and skipped, and the process ends when stdin is closed and nothing waits."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from talaria.cli.stream_input import LINE_LIMIT, InputLineError, parse_line, read_lines
from talaria.testing import ScriptedProvider, call, text

pytestmark = pytest.mark.timeout(120)

STEER = "Also mention the docs folder."
WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.05; done; echo released"
"""A command that runs until the test creates `go` in the working folder."""


def user(content: Any, **extra: Any) -> bytes:
    record = {"type": "user", "message": {"role": "user", "content": content}, **extra}
    return (json.dumps(record) + "\n").encode()


class Records:
    """The JSON lines of a process's stdout, read by a thread as they come."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.seen: list[dict[str, Any]] = []
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            self._lines.put(json.loads(line))
        self._lines.put(None)

    def until(self, kind: str) -> dict[str, Any]:
        """Read on to the next record of type `kind`."""
        while (record := self._lines.get(timeout=60)) is not None:
            self.seen.append(record)
            if record["type"] == kind:
                return record
        raise AssertionError(f"no {kind!r} record; read {[r['type'] for r in self.seen]}")

    def rest(self) -> list[dict[str, Any]]:
        while (record := self._lines.get(timeout=60)) is not None:
            self.seen.append(record)
        return self.seen

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [record for record in self.seen if record["type"] == kind]


@pytest.fixture
def talaria(tmp_path: Path) -> Iterator[Any]:
    started: list[subprocess.Popen[bytes]] = []
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()

    def start(server: ScriptedProvider, *extra: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "TALARIA_HOME": str(home), "HOME": str(home)}
        env.pop("TALARIA_MODEL", None)
        command = [sys.executable, "-m", "talaria.cli.main", "-p", "--input-format", "stream-json"]
        command += ["--output-format"]
        command += ["stream-json", "-m", "scripted-model", "--base-url", server.openai_base_url]
        command += ["--api-key", "k", "--toolsets", "terminal", "--yolo", *extra]
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, cwd=work,
        )  # fmt: skip
        started.append(process)
        return process

    start.work = work  # type: ignore[attr-defined]
    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def user_texts(server: ScriptedProvider, index: int) -> list[str]:
    messages = server.requests[index].body["messages"]
    return [m["content"] for m in messages if m["role"] == "user"]


def send(process: subprocess.Popen[bytes], line: bytes) -> None:
    assert process.stdin is not None
    process.stdin.write(line)
    process.stdin.flush()


def test_messages_during_a_turn_are_queued_and_a_steer_line_steers(talaria: Any) -> None:
    steps = [call("terminal", {"command": WAIT_FOR_GO}), text("First done."), text("Two done.")]
    with ScriptedProvider(steps) as server:
        server.add(text("Three done."))
        process = talaria(server)
        assert process.stdout is not None and process.stderr is not None
        records = Records(process.stdout)
        send(process, user("one"))
        records.until("tool_started")

        send(process, user("two"))
        queued = records.until("message_queued")
        send(process, user([{"type": "text", "text": STEER}], steer=True))
        accepted = records.until("steer_accepted")
        send(process, b"this is not json\n")
        error = records.until("error")
        (talaria.work / "go").touch()

        first = records.until("result")
        assert first["completed"] and first["final_response"] == "Two done."
        send(process, user("three"))
        process.stdin.close()  # type: ignore[union-attr]
        seen = records.rest()
        assert process.wait(60) == 0, process.stderr.read().decode()

    assert queued["text"] == "two" and queued["position"] == 1
    assert accepted["text"] == STEER
    assert "not JSON" in error["message"]
    (started,) = records.of("queued_message_started")
    assert started["message_id"] == queued["message_id"]
    (delivered,) = records.of("steer_delivered")
    assert delivered["steer_ids"] == [accepted["steer_id"]]
    assert [r["type"] for r in seen].count("result") == 2 and seen[-1]["type"] == "result"
    assert seen[-1]["final_response"] == "Three done."

    after_tool = json.dumps(server.requests[1].body)
    assert after_tool.index("released") < after_tool.index(STEER), "after the tool's result"
    assert user_texts(server, 1) == ["one", STEER]
    assert user_texts(server, 2) == ["one", STEER, "two"]
    assert user_texts(server, 3) == ["one", STEER, "two", "three"]
    assert server.invalid_requests == []


def test_stream_json_input_needs_stream_json_output_and_a_message(talaria: Any) -> None:
    with ScriptedProvider([]) as server:
        wrong = talaria(server, "--output-format", "text")
        _, err = wrong.communicate(user("hi"), timeout=60)
        assert wrong.returncode == 2 and b"needs --output-format stream-json" in err

        durable = talaria(server, "--temporal", "127.0.0.1:9")
        _, err = durable.communicate(user("hi"), timeout=60)
        assert durable.returncode == 2 and b"does not run with --temporal" in err

        empty = talaria(server)
        out, err = empty.communicate(b"\n", timeout=60)
        assert empty.returncode == 2 and b"no user message on stdin" in err
        assert json.loads(out.splitlines()[-1])["type"] == "result"
        assert server.requests == []


def test_lines_are_read_whole_and_an_overlong_one_is_reported_once() -> None:
    read, write = os.pipe()
    huge = b"x" * (LINE_LIMIT + 70_000)
    feed = b"first\n" + huge + b"\nsecond\nlast without newline"
    writer = threading.Thread(target=lambda: (os.write(write, feed), os.close(write)))
    writer.start()
    lines: list[bytes] = []
    ended: list[bool] = []
    read_lines(read, lines.append, lambda: ended.append(True))
    writer.join()
    os.close(read)
    assert lines[0] == b"first" and lines[2:] == [b"second", b"last without newline"]
    assert len(lines) == 4 and len(lines[1]) > LINE_LIMIT and ended == [True]
    with pytest.raises(InputLineError, match="at most"):
        parse_line(lines[1])
