"""A scripted editor for the ACP tests: the SDK's client side, driving `talaria acp` in a real
subprocess, recording every update and answering permission, file and terminal requests the way
an editor would (files from its own buffers, commands in real processes)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp
import pytest
import yaml
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    DeniedOutcome,
    EnvVariable,
    FileSystemCapabilities,
    KillTerminalResponse,
    McpServerStdio,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    ToolCallProgress,
    ToolCallStart,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from talaria.testing.server import ScriptedProvider

KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "OPENAI_BASE_URL")


def agent_env(home: Path) -> dict[str, str]:
    """The subprocess's environment: this one, with a private home and no real model keys."""
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    env.update(TALARIA_HOME=str(home), HOME=str(home), PYTHONUNBUFFERED="1")
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


def model_options(server: ScriptedProvider) -> list[str]:
    return ["--base-url", server.openai_base_url, "--model", "scripted-model", "--api-key", "k"]


def agent_command(server: ScriptedProvider, *extra: str) -> list[str]:
    return [sys.executable, "-m", "talaria.cli.main", "acp", *model_options(server), *extra]


def acpx_binary() -> str:
    """acpx, an ACP client no one here wrote (CI installs it into .tools/npm)."""
    local = (
        Path(__file__).resolve().parents[1] / ".tools" / "npm" / "node_modules" / ".bin" / "acpx"
    )
    found = str(local) if local.exists() else shutil.which("acpx")
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("acpx is missing: .ci/run installs acpx@0.1.15 into .tools/npm")
    pytest.skip("acpx not installed (npm install --prefix .tools/npm acpx@0.1.15)")


def talaria_cli(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """The `talaria` command line on the same home, as a user would run it beside the editor."""
    command = [sys.executable, "-m", "talaria.cli.main", *argv]
    return subprocess.run(command, capture_output=True, text=True, env=agent_env(home), timeout=90)


@dataclass
class _Terminal:
    process: asyncio.subprocess.Process
    output: bytearray = field(default_factory=bytearray)
    pump: asyncio.Task[None] | None = None


@dataclass
class Editor:
    """The client: what it was sent, and how it answers."""

    answer: str | None = "allow-once"
    """The permission option it picks; None answers "cancelled"."""
    buffers: dict[str, str] = field(default_factory=dict)
    """Open files with unsaved text (path -> text); reads fall back to the disk."""
    updates: list[Any] = field(default_factory=list)
    permissions: list[Any] = field(default_factory=list)
    terminals: dict[str, _Terminal] = field(default_factory=dict)
    fs_calls: list[tuple[str, str]] = field(default_factory=list)

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **_: Any
    ) -> RequestPermissionResponse:
        self.permissions.append((tool_call, options))
        if self.answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(option_id=self.answer, outcome="selected")
        )

    async def read_text_file(self, session_id: str, path: str, **_: Any) -> ReadTextFileResponse:
        self.fs_calls.append(("read", path))
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        try:
            return ReadTextFileResponse(content=Path(path).read_text())
        except OSError as exc:
            raise acp.RequestError.resource_not_found(path) from exc

    async def write_text_file(
        self, session_id: str, path: str, content: str, **_: Any
    ) -> WriteTextFileResponse:
        self.fs_calls.append(("write", path))
        self.buffers[path] = content
        return WriteTextFileResponse()

    async def create_terminal(
        self, session_id: str, command: str, args: list[str] | None = None, **kw: Any
    ) -> CreateTerminalResponse:
        process = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=kw.get("cwd"),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        terminal = _Terminal(process)
        terminal.pump = asyncio.create_task(_pump(process, terminal.output))
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = terminal
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **_: Any
    ) -> TerminalOutputResponse:
        terminal = self.terminals[terminal_id]
        code = terminal.process.returncode
        return TerminalOutputResponse(
            output=terminal.output.decode(),
            truncated=False,
            exit_status=TerminalExitStatus(exit_code=code) if code is not None else None,
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **_: Any
    ) -> WaitForTerminalExitResponse:
        terminal = self.terminals[terminal_id]
        code = await terminal.process.wait()
        if terminal.pump is not None:
            await terminal.pump
        return WaitForTerminalExitResponse(exit_code=code if code >= 0 else None)

    async def kill_terminal(self, session_id: str, terminal_id: str, **_: Any) -> Any:
        with contextlib.suppress(ProcessLookupError):
            self.terminals[terminal_id].process.kill()
        return KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **_: Any) -> Any:
        await self.kill_terminal(session_id, terminal_id)
        await self.terminals[terminal_id].process.wait()
        return ReleaseTerminalResponse()

    # ---- what the tests read ------------------------------------------------------------

    def text(self) -> str:
        return "".join(
            u.content.text
            for u in self.updates
            if isinstance(u, AgentMessageChunk) and hasattr(u.content, "text")
        )

    def of(self, kind: type) -> list[Any]:
        return [u for u in self.updates if isinstance(u, kind)]

    def starts(self) -> list[ToolCallStart]:
        return self.of(ToolCallStart)

    def progress(self, call_id: str | None = None) -> list[ToolCallProgress]:
        found = self.of(ToolCallProgress)
        return [u for u in found if call_id is None or u.tool_call_id == call_id]

    async def wait_for(self, found: Callable[[], Any], timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = found()
            if value:
                return value
            await asyncio.sleep(0.02)
        raise AssertionError(f"timed out after {timeout} s; updates so far: {self.updates!r}")


async def _pump(process: asyncio.subprocess.Process, into: bytearray) -> None:
    assert process.stdout is not None
    while chunk := await process.stdout.read(4096):
        into.extend(chunk)


def capabilities(*, fs: bool = False, terminal: bool = False) -> ClientCapabilities:
    return ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs), terminal=terminal
    )


@contextlib.asynccontextmanager
async def connected(
    editor: Editor,
    server: ScriptedProvider,
    home: Path,
    *extra: str,
    caps: ClientCapabilities | None = None,
) -> AsyncIterator[Any]:
    """`talaria acp` running and initialized; its stderr goes to home/acp-stderr.log."""
    command = agent_command(server, *extra)
    with open(home / "acp-stderr.log", "ab") as log:
        async with acp.spawn_agent_process(
            editor,
            command[0],
            *command[1:],
            env=agent_env(home),
            cwd=home,
            transport_kwargs={"stderr": log.fileno()},
        ) as (conn, process):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=caps)
            yield conn
        await asyncio.wait_for(process.wait(), 10)


def editor_folders(tmp_path: Path) -> tuple[Path, Path]:
    """A private talaria home (no context engine) and a project folder for the editor."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.yaml").write_text(yaml.safe_dump({"context": {"engine": "none"}}))
    return home, work


def time_server(marker: str) -> McpServerStdio:
    """mcp-server-time with an environment variable that finds its process again."""
    command = str(Path(sys.executable).with_name("mcp-server-time"))
    env = [EnvVariable(name="TALARIA_TEST_MARK", value=marker)]
    return McpServerStdio(name="clock", command=command, args=["--local-timezone=UTC"], env=env)


def processes_marked(marker: str) -> list[int]:
    """Live processes whose environment holds TALARIA_TEST_MARK=marker."""
    wanted = f"TALARIA_TEST_MARK={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if wanted in environ.split(b"\0"):
            found.append(int(entry.name))
    return found
