"""Many Matrix rooms talking at once to one `talaria gateway` process, on a real Synapse.

One person is in `--rooms` rooms with the bot. In every room at once they send `--messages`
messages, each after the answer to the one before (the timed phase), then `--burst` more
without waiting (the gateway queues them). The model is the scripted provider in its own
process, answering each message with `echo: <message>` at once. Checked: every message is
answered exactly once, in order, in its own room. Measured on the gateway process (from
/proc): CPU per message and resident memory added per room; and, from the person's client,
the time from sending a message to seeing its answer.

The floor is the least any bot can do on the same homeserver: a matrix-nio client that echoes
each message as it syncs it, no agent, no session, no ledger (`--echo-bot`, its own process,
measured the same way). "Added latency" is talaria's median minus the floor's.

    python bench/gateway.py                  # 50 rooms, 4 timed messages and 3 queued each
    python bench/gateway.py --rooms 10 --messages 2 --burst 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))
sys.path.insert(0, str(BENCH.parent / "tests" / "gateway"))

from common import ProviderProcess, Row, report  # noqa: E402
from matrix_server import Synapse  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
WAIT_S = 300.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process `pid` (its threads included), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class Person:
    """One matrix-nio client in every room, recording when each bot message (or edit) with a
    given text first showed up."""

    def __init__(self, server: Synapse, name: str) -> None:
        from nio import AsyncClient

        self.user_id = server.user_id(name)
        self.client = AsyncClient(server.url, self.user_id)
        self.client.access_token = server.register(name)
        self.seen: dict[str, dict[str, float]] = {}
        """room -> answer text -> when first seen (time.monotonic())."""
        self.answers: dict[str, list[str]] = {}
        """room -> the bot's messages in order (edits replace their text)."""
        self.joined: set[str] = set()
        self._by_event: dict[str, tuple[str, int]] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.client.sync(timeout=0, full_state=True)
        self._task = asyncio.create_task(self._sync_forever())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        await self.client.close()

    async def _sync_forever(self) -> None:
        from nio import SyncResponse

        while True:
            response = await self.client.sync(timeout=10000)
            if not isinstance(response, SyncResponse):
                await asyncio.sleep(0.5)
                continue
            now = time.monotonic()
            for room_id, room in response.rooms.join.items():
                for event in room.timeline.events:
                    self._record(room_id, event.source, now)

    def _record(self, room: str, event: dict[str, Any], now: float) -> None:
        content = event.get("content") or {}
        if event.get("type") == "m.room.member" and content.get("membership") == "join":
            if event.get("state_key") != self.user_id:
                self.joined.add(room)
            return
        if event.get("type") != "m.room.message" or event.get("sender") == self.user_id:
            return
        relates = content.get("m.relates_to") or {}
        answers = self.answers.setdefault(room, [])
        if relates.get("rel_type") == "m.replace" and relates.get("event_id") in self._by_event:
            body = str((content.get("m.new_content") or {}).get("body", ""))
            answers[self._by_event[relates["event_id"]][1]] = body
        else:
            body = str(content.get("body", ""))
            self._by_event[event["event_id"]] = (room, len(answers))
            answers.append(body)
        self.seen.setdefault(room, {}).setdefault(body, now)

    async def until(self, check: Any, what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not check():
            if time.monotonic() > deadline:
                raise SystemExit(f"not seen in {WAIT_S:g} s: {what}; seen: {self.answers}")
            await asyncio.sleep(0.02)

    async def say(self, room: str, text: str) -> None:
        await self.client.room_send(room, "m.room.message", {"msgtype": "m.text", "body": text})

    async def converse(self, room: str, label: str, count: int) -> list[float]:
        """Send `count` messages, each once the answer to the one before is seen."""
        latencies = []
        for index in range(count):
            said = f"{label} m{index}"
            sent = time.monotonic()
            await self.say(room, said)
            expected = f"echo: {said}"
            await self.until(lambda e=expected: e in self.seen.get(room, {}), expected)
            latencies.append(self.seen[room][expected] - sent)
        return latencies


async def bot_side(
    server: Synapse, person: Person, rooms: int, launch: Any, messages: int, burst: int
) -> dict[str, Any]:
    """Start a bot (`launch(user_id, token)` -> its process), let it join `rooms` new rooms
    with `person`, and measure it."""
    name = f"bot{os.getpid()}{int(time.monotonic() * 1000) % 100000}"
    token = server.register(name)
    bot_id = server.user_id(name)
    created = [
        await person.client.room_create(invite=[bot_id], is_direct=True) for _ in range(rooms)
    ]
    room_ids = [str(r.room_id) for r in created]
    process = launch(bot_id, token)
    try:
        await person.until(lambda: person.joined >= set(room_ids), f"{rooms} rooms joined")
        await asyncio.sleep(1.0)  # the first sync's work is done: measure from a quiet process
        cpu0, rss0 = cpu_seconds(process.pid), rss_bytes(process.pid)
        began = time.monotonic()
        latencies = await asyncio.gather(
            *(person.converse(room, f"r{i}", messages) for i, room in enumerate(room_ids))
        )
        wall = time.monotonic() - began
        cpu1, rss1 = cpu_seconds(process.pid), rss_bytes(process.pid)
        for i, room in enumerate(room_ids):
            for index in range(burst):
                await person.say(room, f"r{i} b{index}")
        expected = {
            room: [f"echo: r{i} m{n}" for n in range(messages)]
            + [f"echo: r{i} b{n}" for n in range(burst)]
            for i, room in enumerate(room_ids)
        }

        def answered() -> dict[str, list[str]]:
            return {
                room: [a for a in person.answers.get(room, []) if a.startswith("echo: ")]
                for room in room_ids
            }

        await person.until(
            lambda: all(len(answered()[room]) >= len(expected[room]) for room in room_ids),
            "every burst answered",
        )
        await asyncio.sleep(2.0)  # a duplicate would come now
        wrong = {room: got for room, got in answered().items() if got != expected[room]}
        if wrong:
            raise SystemExit(f"answers missing, repeated or out of order: {wrong}")
    finally:
        process.terminate()
        process.wait(timeout=60)
    flat = [value for room in latencies for value in room]
    count = len(flat)
    return {
        "latency_p50": statistics.median(flat),
        "latency_p90": statistics.quantiles(flat, n=10)[-1] if count > 1 else flat[0],
        "cpu_per_message": (cpu1 - cpu0) / count,
        "memory_per_room": (rss1 - rss0) / rooms,
        "messages": count + rooms * burst,
        "wall": wall,
    }


def launch_gateway(server: Synapse, person: Person, url: str, home: Path) -> Any:
    def launch(bot_id: str, token: str) -> subprocess.Popen[str]:
        platform = {
            "type": "matrix",
            "homeserver": server.url,
            "user_id": bot_id,
            "access_token": token,
            "allow_users": [person.user_id],
            "sync_timeout_ms": 10000,
        }
        config = {"gateway": {"platforms": {"matrix": platform}}, "memory": {"enabled": False}}
        (home / "config.yaml").write_text(json.dumps(config))
        command = [
            sys.executable, "-m", "talaria.cli.main", "gateway", "--home", str(home),
            "--model", "scripted-model", "--base-url", url, "--api-key", "bench",
            "--toolsets", "",
        ]  # fmt: skip
        env = {**os.environ, "TALARIA_HOME": str(home)}
        process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        assert process.stderr is not None
        line = process.stderr.readline()
        if "connected" not in line:
            raise SystemExit(f"talaria gateway did not start: {line}{process.stderr.read()}")
        return process

    return launch


def launch_echo_bot(server: Synapse) -> Any:
    def launch(bot_id: str, token: str) -> subprocess.Popen[str]:
        command = [sys.executable, __file__, "--echo-bot", server.url, bot_id, token]
        return subprocess.Popen(command, text=True)

    return launch


async def echo_bot(homeserver: str, user_id: str, token: str) -> None:
    """The floor: join every invite, answer each message with `echo: <message>`."""
    from nio import AsyncClient, InviteMemberEvent, MatrixRoom, RoomMessageText

    client = AsyncClient(homeserver, user_id)
    client.access_token = token

    async def on_message(room: MatrixRoom, event: RoomMessageText) -> None:
        if event.sender != user_id:
            body = {"msgtype": "m.text", "body": f"echo: {event.body}"}
            await client.room_send(room.room_id, "m.room.message", body)

    async def on_invite(room: MatrixRoom, event: InviteMemberEvent) -> None:
        await client.join(room.room_id)

    first = await client.sync(timeout=0, full_state=True)
    for room_id in first.rooms.invite:  # type: ignore[union-attr]
        await client.join(room_id)
    client.add_event_callback(on_message, RoomMessageText)  # type: ignore[arg-type]
    client.add_event_callback(on_invite, InviteMemberEvent)  # type: ignore[arg-type]
    await client.sync_forever(timeout=10000)


async def run(args: argparse.Namespace) -> None:
    synapse = Synapse()
    synapse.start()
    home = Path(tempfile.mkdtemp(prefix="talaria-bench-gateway-"))
    try:
        with ProviderProcess("echo") as provider:  # type: ignore[arg-type]
            person = Person(synapse, f"person{os.getpid()}")
            await person.start()
            try:
                sides = (
                    ("floor", launch_echo_bot(synapse)),
                    ("talaria", launch_gateway(synapse, person, provider.url, home)),
                )
                figures = {}
                for label, launch in sides:
                    figures[label] = await bot_side(
                        synapse, person, args.rooms, launch, args.messages, args.burst
                    )
            finally:
                await person.stop()
    finally:
        synapse.stop()
    ours, floor = figures["talaria"], figures["floor"]

    def row(metric: str, key: str, unit: str) -> Row:
        return Row(metric, ours[key], floor=floor[key], unit=unit)

    added = ours["latency_p50"] - floor["latency_p50"]
    rows = [
        row("latency per message (median)", "latency_p50", "s"),
        row("latency per message (p90)", "latency_p90", "s"),
        Row("added latency per message (median)", added, unit="s"),
        row("CPU per message", "cpu_per_message", "s"),
        row("memory per room", "memory_per_room", "bytes"),
        row("messages answered once, in order", "messages", "count"),
    ]
    notes = {
        "rooms": args.rooms,
        "timed messages per room": args.messages,
        "queued messages per room": args.burst,
        "Synapse start (s)": round(synapse.started_in, 1),
        "timed phase wall time (s)": {k: round(v["wall"], 1) for k, v in figures.items()},
    }
    report("gateway", f"{args.rooms} Matrix rooms at once on one gateway process", rows, notes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rooms", type=int, default=50)
    parser.add_argument("--messages", type=int, default=4)
    parser.add_argument("--burst", type=int, default=3)
    parser.add_argument("--echo-bot", nargs=3, metavar=("HOMESERVER", "USER_ID", "TOKEN"))
    args = parser.parse_args()
    if args.echo_bot:
        asyncio.run(echo_bot(*args.echo_bot))
        return
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
