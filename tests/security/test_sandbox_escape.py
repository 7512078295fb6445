"""The sandbox's own parts are trusted, and network off means off: the issue's escapes through a
`bwrap` planted on PATH, a bubblewrap inside the workspace, and a local PostgreSQL (or any)
Unix socket reached with `sandbox.network: false`."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from boundary_helpers import make_agent, need_sandbox, outside_tmp, turn, world_fixture  # noqa: F401

from talaria.cli.main import main
from talaria.testing import ScriptedProvider
from talaria.tools.sandbox_probe import sandbox_support

need_sandbox()

PG_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pg_throwaway.sh"


def test_a_bwrap_planted_on_path_is_never_used(
    provider: ScriptedProvider, world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command plants `.venv/bin/bwrap` (which would run what it is given bare) in the
    workspace, whose venv is first on PATH; the next process's commands are still confined."""
    marker = world["outside"] / "fake-bwrap-ran"
    escaped = world["outside"] / "escaped.txt"
    venv_bin = world["work"] / ".venv" / "bin"
    plant = (
        f"mkdir -p {venv_bin} && printf '#!/bin/sh\\ntouch {marker}\\n"
        'while [ "$1" != -- ]; do shift; done; shift; exec "$@"\\n\' > '
        f"{venv_bin}/bwrap && chmod +x {venv_bin}/bwrap && echo planted"
    )
    (planted,) = turn(
        provider, make_agent(provider, world, approvals="off"), ("terminal", {"command": plant})
    )
    assert "planted" in planted
    monkeypatch.setenv("PATH", f"{venv_bin}:{os.environ['PATH']}")
    sandbox_support.cache_clear()  # as a new process would start
    try:
        agent = make_agent(provider, world, approvals="off")
        (result,) = turn(provider, agent, ("terminal", {"command": f"echo x > {escaped}"}))
    finally:
        sandbox_support.cache_clear()
    assert "Read-only file system" in result
    assert not escaped.exists() and not marker.exists()


def test_a_configured_bwrap_inside_the_workspace_is_refused(
    provider: ScriptedProvider, world: dict[str, Path]
) -> None:
    copy = world["work"] / "bwrap"
    system = sandbox_support().bwrap
    assert system is not None
    shutil.copy2(system, copy)
    config = {"sandbox.bwrap_path": str(copy), "sandbox.required": True}
    agent = make_agent(provider, world, approvals="off", config=config)
    (result,) = turn(provider, agent, ("terminal", {"command": "touch made"}))
    assert "the command was not run" in result and not (world["work"] / "made").exists()
    assert "inside a writable root" in result or "not trusted" in result


def test_a_configured_bwrap_that_others_can_write_is_not_trusted(world: dict[str, Path]) -> None:
    copy = world["outside"] / "bwrap"
    system = sandbox_support().bwrap
    assert system is not None
    shutil.copy2(system, copy)
    copy.chmod(0o777)
    support = sandbox_support(str(copy))
    assert not support.available and "not trusted" in support.detail
    assert not sandbox_support("relative/bwrap").available


def test_doctor_says_which_bwrap_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["doctor", "--home", str(tmp_path)])
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.split()[:1] == ["sandbox"])
    assert code in (0, 2)
    assert f"bubblewrap at {sandbox_support().bwrap}" in line
    assert "never looked up on PATH" in line and "root-owned" in line


@pytest.fixture
def unix_server(world: dict[str, Path]) -> Iterator[Path]:
    """A Unix socket server outside the sandbox that answers every connection with 'reached'."""
    path = world["outside"] / "service.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            connection.sendall(b"reached\n")
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path
    stop.set()
    thread.join(2)
    server.close()


def _connect(path: Path) -> str:
    code = (
        "import socket; s = socket.socket(socket.AF_UNIX); "
        f"s.connect({str(path)!r}); print(s.recv(64).decode().strip())"
    )
    return f'{sys.executable} -c "{code}"'


@pytest.mark.parametrize("network", [False, True])
def test_a_unix_socket_outside_is_reachable_only_with_network_on(
    provider: ScriptedProvider, world: dict[str, Path], unix_server: Path, network: bool
) -> None:
    agent = make_agent(provider, world, approvals="off", config={"sandbox.network": network})
    (result,) = turn(provider, agent, ("terminal", {"command": _connect(unix_server)}))
    assert ("reached" in result) == network, result
    if not network:
        assert "Address family not supported" in result and "no network access" in result


def test_with_network_off_commands_keep_socketpairs_and_their_own_loopback(
    provider: ScriptedProvider, world: dict[str, Path]
) -> None:
    code = (
        "import socket; a, b = socket.socketpair(); a.send(b'pair'); print(b.recv(4).decode()); "
        "s = socket.create_server(('127.0.0.1', 0)); "
        "c = socket.create_connection(s.getsockname()); print('loopback')"
    )
    agent = make_agent(provider, world, approvals="off")
    (result,) = turn(provider, agent, ("terminal", {"command": f'{sys.executable} -c "{code}"'}))
    assert "pair" in result and "loopback" in result and "exit code: 0" in result


@pytest.fixture(scope="module")
def postgres() -> Iterator[tuple[Path, int]]:
    """A real PostgreSQL cluster whose Unix socket lies outside /tmp (the sandbox's /tmp is
    private, which would hide it for the wrong reason)."""
    base = Path(tempfile.mkdtemp(prefix="talaria-pg-socket-", dir=outside_tmp()))
    base.chmod(0o755)  # the server may run as the postgres user
    directory = base / "cluster"
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    started = subprocess.run(
        ["bash", str(PG_SCRIPT), "start", str(directory), str(port)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if started.returncode != 0 or shutil.which("psql") is None:
        shutil.rmtree(base, ignore_errors=True)
        reason = f"no PostgreSQL server to test against: {started.stderr.strip()}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield directory, port
    finally:
        subprocess.run(["bash", str(PG_SCRIPT), "stop", str(directory)], timeout=60, check=False)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("network", [False, True])
def test_a_local_postgresql_socket_cannot_run_a_program_with_network_off(
    provider: ScriptedProvider, world: dict[str, Path], postgres: tuple[Path, int], network: bool
) -> None:
    """The issue's escape: `COPY ... TO PROGRAM` through the server's Unix socket runs a
    program outside the sandbox, as the server's user."""
    directory, port = postgres
    canary = directory / f"pwned-{network}"
    sql = f"COPY (SELECT 1) TO PROGRAM 'touch {canary}'"
    command = f'psql -h {directory} -p {port} -U postgres -d postgres -Atc "{sql}"'
    agent = make_agent(provider, world, approvals="off", config={"sandbox.network": network})
    (result,) = turn(provider, agent, ("terminal", {"command": command}))
    assert canary.exists() == network, result
