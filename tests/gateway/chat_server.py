"""What the real chat servers of the gateway tests share: a server process on loopback with
its own folder and log, started once per test run and stopped with it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

START_S = 90.0
"""How long a server may take to listen (Synapse on a loaded 2-core machine is the slowest)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def require(binary: str, package: str) -> str:
    """The path of `binary`, or the test fails (in CI) or is skipped (elsewhere)."""
    found = shutil.which(binary) or (binary if os.path.exists(binary) else None)
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail(f"{binary} is missing: .ci/run installs {package}")
    pytest.skip(f"no {binary} (install {package}, as .ci/run does)")


class ServerProcess:
    """One server in a folder of its own (`directory`), its output in `directory/out.log`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.directory = Path(tempfile.mkdtemp(prefix=f"talaria-{name}-"))
        os.chmod(self.directory, 0o755)  # servers that drop privileges read their config here
        self.proc: subprocess.Popen[bytes] | None = None

    def spawn(self, command: list[str], env: dict[str, str] | None = None) -> None:
        with (self.directory / "out.log").open("wb") as log:
            self.proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )

    def wait_listening(self, port: int, greeting: bytes = b"") -> None:
        """Until `port` accepts a connection (and says `greeting` first, when given)."""
        deadline = time.monotonic() + START_S
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited at start:\n{self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
                    if not greeting or sock.recv(256).startswith(greeting):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} did not listen in {START_S:g} s:\n{self.log()}")
            time.sleep(0.1)

    def log(self) -> str:
        path = self.directory / "out.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.directory, ignore_errors=True)
