"""A gateway on the in-memory platform and the scripted provider, for the core's tests."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import FOREVER, scripted_agent
from talaria.gateway.core import Gateway
from talaria.gateway.fake import FakePlatform
from talaria.gateway.platform import Capabilities
from talaria.gateway.settings import platform_settings
from talaria.store.sqlite import SQLiteSessionStore
from talaria.testing import ScriptedProvider, calls, text

ALICE = "alice"
TERMINAL = {"toolsets": ["terminal"], "tools": []}
"""Agent options that give the model the terminal (where `rm -rf` asks for approval)."""


def removal_asked(tmp_path: Path, answer: str) -> tuple[Path, ScriptedProvider]:
    """A folder, and a model that asks to remove it with the terminal (an approval for the
    chat to answer), then says `answer`."""
    folder = tmp_path / "folder"
    folder.mkdir()
    return folder, ScriptedProvider(
        [calls(("terminal", {"command": f"rm -rf {folder}"})), text(answer)]
    )


class Gate:
    """Holds a scripted reply until the test opens it: the test orders what happens by what
    the chat shows (an acknowledgement), not by how long a reply takes."""

    def __init__(self) -> None:
        self._open = threading.Event()

    def hold(self, reply: Any) -> Callable[[dict[str, Any]], Any]:
        def step(body: dict[str, Any]) -> Any:
            assert self._open.wait(FOREVER)
            return reply

        return step

    def open(self) -> None:
        self._open.set()


@dataclass
class Harness:
    gateway: Gateway
    platform: Any
    """The FakePlatform unless the test gave another."""
    store: SQLiteSessionStore
    server: ScriptedProvider
    waits: list[float] = field(default_factory=list)
    """What the gateway waited out for rate limits and backoff (no real sleeping)."""

    async def until(self, check: Callable[[], object]) -> None:
        """Wait (on the loop) until `check()` holds; the test's timeout bounds it."""
        while not check():
            await asyncio.sleep(0.01)

    def texts(self) -> list[str]:
        return [m.text for m in self.platform.messages]


@asynccontextmanager
async def running_gateway(
    server: ScriptedProvider,
    home: Path,
    *,
    capabilities: Capabilities | None = None,
    settings: dict[str, Any] | None = None,
    agent: dict[str, Any] | None = None,
    store: SQLiteSessionStore | None = None,
    platform: Any = None,
) -> AsyncIterator[Harness]:
    """A started gateway on `platform` (the in-memory one unless given; its name is its
    type), with alice allowed unless `settings` says otherwise."""
    fake = platform or FakePlatform("fake", capabilities)
    config = {"type": fake.name, "allow_users": [ALICE], **(settings or {})}
    chosen = platform_settings(fake.name, config)
    db = store or SQLiteSessionStore(home / "state.db")
    options = {"toolsets": [], **(agent or {})}

    def make_agent(session_id: str, model: str | None, notes: tuple[str, ...]) -> Any:
        extra = {"model": model} if model else {}
        return scripted_agent(
            server, home, session_id=session_id, store=db, source="gateway", prompt_notes=notes,
            **options, **extra,
        )  # fmt: skip

    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    gateway = Gateway([(chosen, fake)], db, make_agent, edit_interval=0.0, sleep=sleep)
    await gateway.start()
    try:
        yield Harness(gateway, fake, db, server, waits)
    finally:
        await gateway.stop()
