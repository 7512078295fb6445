"""Starting and stopping one Chromium for one session.

Chromium is started headless with a fresh profile in a temporary folder, its DevTools
websocket on a free loopback port (read back from the profile's `DevToolsActivePort` file),
and every request sent through the guard proxy (`talaria.tools.browser.guard`); loopback is
not exempt (`<-loopback>`) and WebRTC may not send UDP around the proxy.

No orphan survives talaria: Chromium is also given `--remote-debugging-pipe`, whose two pipes
only this process holds. Chromium quits when that pipe closes, which the kernel does however
this process ends (even by SIGKILL); `close` ends it sooner, with the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from talaria.tools.base import ToolError

START_TIMEOUT = 30.0
STOP_GRACE = 5.0
_PIPE_IN, _PIPE_OUT = 3, 4
"""The descriptors Chromium reads and writes with --remote-debugging-pipe."""


def find_chromium(configured: str = "") -> str | None:
    """The Chromium to start: `browser.executable`, else the first of the usual names on PATH."""
    if configured:
        return shutil.which(configured) or (configured if os.access(configured, os.X_OK) else None)
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _high_pipe() -> tuple[int, int]:
    """A pipe on descriptors above 4, so that putting it on 3 and 4 in the child never
    overwrites one of its own ends."""
    ends = []
    for end in os.pipe():
        ends.append(fcntl.fcntl(end, fcntl.F_DUPFD_CLOEXEC, 10))
        os.close(end)
    return ends[0], ends[1]


@dataclass
class Chromium:
    """A running Chromium: its process, profile folder and DevTools websocket URL."""

    process: subprocess.Popen[bytes]
    profile: Path
    websocket_url: str
    lifeline: list[int] = field(default_factory=list)

    @classmethod
    async def start(cls, executable: str, proxy_port: int, *, headless: bool = True) -> Chromium:
        profile = Path(tempfile.mkdtemp(prefix="talaria-browser-"))
        to_chromium, from_us = _high_pipe()
        to_us, from_chromium = _high_pipe()

        def pipes() -> None:  # in the child, before exec: the pipe on descriptors 3 and 4
            os.dup2(to_chromium, _PIPE_IN)
            os.dup2(from_chromium, _PIPE_OUT)

        arguments = [
            executable,
            *(["--headless=new"] if headless else []),
            "--remote-debugging-port=0",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            f"--proxy-server=http://127.0.0.1:{proxy_port}",
            "--proxy-bypass-list=<-loopback>",
            "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-client-side-phishing-detection",
            "--disable-domain-reliability",
            "--disable-features=AutofillServerCommunication,OptimizationHints,Translate,"
            "MediaRouter,InterestFeedContentSuggestions,CertificateTransparencyComponentUpdater",
            "--no-pings",
            "--disable-sync",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--password-store=basic",
            "--window-size=1280,900",
            *(["--no-sandbox"] if os.geteuid() == 0 else []),  # Chromium's own sandbox needs a user
            "about:blank",
        ]
        log = (profile / "chromium.log").open("wb")
        try:
            process = subprocess.Popen(
                arguments,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=pipes,
                pass_fds=(_PIPE_IN, _PIPE_OUT),
                start_new_session=True,
            )
        except OSError as exc:
            shutil.rmtree(profile, ignore_errors=True)
            raise ToolError(f"cannot start the browser ({executable}): {exc}") from None
        finally:
            log.close()
            os.close(to_chromium)
            os.close(from_chromium)
        chromium = cls(process, profile, "", [from_us, to_us])
        try:
            chromium.websocket_url = await chromium._wait_for_port()
        except BaseException:
            chromium.stop()
            raise
        return chromium

    async def _wait_for_port(self) -> str:
        """The websocket URL Chromium writes to `DevToolsActivePort` once it listens."""
        active = self.profile / "DevToolsActivePort"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_TIMEOUT
        while loop.time() < deadline:
            if self.process.poll() is not None:
                raise ToolError(f"the browser exited at start: {self._log_tail()}")
            with contextlib.suppress(OSError):
                lines = active.read_text().splitlines()
                if len(lines) >= 2:
                    return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
            await asyncio.sleep(0.05)
        raise ToolError(f"the browser did not start within {START_TIMEOUT:g} s")

    def _log_tail(self) -> str:
        try:
            text = (self.profile / "chromium.log").read_text(errors="replace")
        except OSError:
            return "no output"
        lines = [line for line in text.splitlines() if line.strip()]
        return " / ".join(lines[-3:]) or "no output"

    def stop(self) -> None:
        """End Chromium (SIGTERM, SIGKILL after a grace) and remove its profile."""
        for descriptor in self.lifeline:
            with contextlib.suppress(OSError):
                os.close(descriptor)
        self.lifeline = []
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, 15)
            try:
                self.process.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, 9)
                self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
