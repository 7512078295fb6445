"""A PostgreSQL server for the tests: `TALARIA_TEST_PG_URL` (CI starts one with
scripts/pg_throwaway.sh), else a throwaway cluster this test run starts and removes."""

from __future__ import annotations

import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "pg_throwaway.sh"


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    url = os.environ.get("TALARIA_TEST_PG_URL")
    if url:
        yield url
        return
    if os.environ.get("CI") == "true":
        pytest.fail("TALARIA_TEST_PG_URL is not set: .ci/run starts PostgreSQL and sets it")
    directory = Path(tempfile.mkdtemp(prefix="talaria-pg-"))
    started = subprocess.run(
        ["bash", str(SCRIPT), "start", str(directory), str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if started.returncode != 0:
        pytest.skip(f"no PostgreSQL server to test against: {started.stderr.strip()}")
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", str(directory)], timeout=60, check=False)


@contextmanager
def _database(server_url: str) -> Iterator[str]:
    """A new database on the server, dropped (with the process's pools) afterwards."""
    import psycopg

    from talaria.store.postgres import close_pools

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    base, _, _ = server_url.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        close_pools()
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def pg_url(pg_server_url: str) -> Iterator[str]:
    """A URL to a fresh database of its own, not yet migrated."""
    with _database(pg_server_url) as url:
        yield url


@pytest.fixture(scope="session")
def _pg_shared_url(pg_server_url: str) -> Iterator[str]:
    with _database(pg_server_url) as url:
        yield url


@pytest.fixture
def pg_clean_url(_pg_shared_url: str) -> str:
    """A URL to a migrated database emptied for this test (much faster than a new one)."""
    from talaria.store.postgres import shared_pool

    with shared_pool(_pg_shared_url).connection() as conn:
        conn.execute(
            "TRUNCATE sessions, messages, session_state, session_writers, gateway_inbound, "
            "gateway_outbound, gateway_chats, gateway_pairing CASCADE"
        )
    return _pg_shared_url
