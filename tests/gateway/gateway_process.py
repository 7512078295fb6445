"""`talaria gateway` as a real process, for the crash tests: one platform configured in a home
of its own, the model scripted; `kill()` sends SIGKILL (nothing is saved on the way out) and
`start()` runs it again on the same home and store."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from helpers import SRC
from talaria.testing import ScriptedProvider

STOP_S = 60.0
CONNECTED = "talaria gateway: connected"


class GatewayProcess:
    def __init__(
        self,
        home: Path,
        server: ScriptedProvider,
        platform: str,
        settings: dict[str, Any],
        env: dict[str, str] | None = None,
    ) -> None:
        self.home, self.server, self.env = home, server, env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        home.mkdir(parents=True, exist_ok=True)
        config = {"gateway": {"platforms": {platform: settings}}}
        (home / "config.yaml").write_text(json.dumps(config))

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(SRC), "TALARIA_HOME": str(self.home),
               "HOME": str(self.home), **self.env}  # fmt: skip
        model = ["--model", "scripted-model", "--base-url", self.server.openai_base_url]
        command = [sys.executable, "-m", "talaria.cli.main", "gateway", *model,
                   "--api-key", "k", "--toolsets", ""]  # fmt: skip
        with (self.home / "gateway.log").open("a") as log:
            self.proc = subprocess.Popen(command, env=env, cwd=self.home, stderr=log)
        self.starts += 1

    async def until_connected(self) -> None:
        """Until the last start has connected its platform (it says so on stderr): a
        platform that keeps no messages for an absent bot (XMPP) loses those sent before."""
        deadline = time.monotonic() + STOP_S
        while self.log().count(CONNECTED) < self.starts:
            assert self.proc is not None and self.proc.poll() is None, self.log()
            assert time.monotonic() < deadline, f"the gateway did not connect: {self.log()}"
            await asyncio.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no handler runs, no connection is closed politely."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(STOP_S)

    def stop(self) -> None:
        """A clean stop (SIGTERM), which must exit 0."""
        assert self.proc is not None
        self.proc.terminate()
        assert self.proc.wait(STOP_S) == 0, self.log()

    def log(self) -> str:
        """What the gateway wrote on stderr (its warnings), across its starts."""
        return (self.home / "gateway.log").read_text(errors="replace")[-4000:]

    def __enter__(self) -> GatewayProcess:
        self.start()
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        if kind is None:
            self.stop()
        else:  # the test failed already: only make sure the process is gone
            self.proc.kill()
            self.proc.wait(STOP_S)


class HoldingApi(Protocol):
    """A local fake of a platform's API that can leave the bot's sends unanswered."""

    held: int

    def user_says(self, text: str) -> Any: ...

    def find(self, text: str) -> Any: ...

    async def until(self, check: Any) -> Any: ...


async def killed_while_sending(
    gateway: GatewayProcess,
    api: HoldingApi,
    sent: Callable[[], object],
    hold: str = "hold_sends",
) -> Any:
    """A user says hi; while the fake holds (`hold`: its flag that holds messages, or files)
    what the gateway sends, unconfirmed, SIGKILL; then the gateway starts again, sends what
    it owes (until `sent()` holds), and answers /help. The update of the hi."""
    setattr(api, hold, True)
    update = api.user_says("hi")
    await api.until(lambda: api.held)  # the answer is on its way, unconfirmed
    gateway.kill()
    setattr(api, hold, False)
    gateway.start()
    await api.until(sent)
    api.user_says("/help")
    await api.until(lambda: api.find("Commands:"))
    return update
