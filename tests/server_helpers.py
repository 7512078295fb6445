"""`talaria serve` as a real subprocess on a free loopback port, and a small SSE reader."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from talaria.testing.server import ScriptedProvider

KEY = "test-server-key-0123456789"


def unattended_workspace(tmp_path: Path) -> tuple[Path, Path]:
    """(home, work): a home whose commands run without approval, and the folder the server
    works in (its checkpoints cover it)."""
    home, work = tmp_path / "talaria", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.yaml").write_text(
        "context:\n  engine: none\nmemory:\n  enabled: false\napprovals:\n  mode: 'off'\n"
    )
    return home, work


@dataclass
class ServeProcess:
    """`talaria serve --port 0` against a scripted provider; `url` once it listens.

    `key=None` starts it without a configured key: `key` is then the one it made and printed
    (the token of the page's address)."""

    provider: ScriptedProvider
    home: Path
    key: str | None = KEY
    extra_args: list[str] = field(default_factory=list)
    port: int = 0
    """0 picks a free one; a fixed port lets a test restart the server where a page expects it."""
    cwd: Path | None = None
    """Where it runs (default: the home)."""
    url: str = ""
    proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20.0) -> ServeProcess:
        self.home.mkdir(parents=True, exist_ok=True)
        config = self.home / "config.yaml"
        if not config.exists():
            config.write_text("context:\n  engine: none\nmemory:\n  enabled: false\n")
        log = self.home / "serve.log"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        env.pop("TALARIA_SERVER_KEY", None)
        if self.key:
            env["TALARIA_SERVER_KEY"] = self.key
        command = [
            sys.executable, "-m", "talaria.cli.main", "serve", "--port", str(self.port),
            "--home", str(self.home), "--base-url", self.provider.openai_base_url,
            "--model", "scripted-model", "--api-key", "provider-key",
            "--api-mode", "chat_completions", "--toolsets", "terminal,clarify", *self.extra_args,
        ]  # fmt: skip
        with open(log, "wb") as sink:
            self.proc = subprocess.Popen(command, stderr=sink, cwd=self.cwd or self.home, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            printed = log.read_text(errors="replace")
            found = re.search(r"listening on (\S+)", printed)
            page = re.search(r"web page: \S+/\?token=(\S+)", printed)
            if found and page:
                self.url = found.group(1)
                self.key = self.key or page.group(1)
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"talaria serve did not start: {log.read_text(errors='replace')}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers, timeout=30)

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@dataclass(frozen=True)
class SseEvent:
    id: int | None
    name: str
    data: Any


def read_events(response: httpx.Response) -> Iterator[SseEvent]:
    """Parse a text/event-stream body as it arrives (pings skipped)."""
    event_id: int | None = None
    name = "message"
    data: list[str] = []
    for line in response.iter_lines():
        if not line:
            if data:
                yield SseEvent(event_id, name, json.loads("\n".join(data)))
            event_id, name, data = None, "message", []
        elif line.startswith(":"):
            continue
        else:
            key, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if key == "id":
                event_id = int(value)
            elif key == "event":
                name = value
            elif key == "data":
                data.append(value)
