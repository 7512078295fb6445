"""Shared fixtures: a running scripted provider and a stream handler that records what it got."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

# The test folders mirror src/talaria and hold no __init__.py; their shared helpers (helpers.py,
# cli_process.py, pty_terminal.py, ...) live here in tests/ and import by their plain names.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from helpers import RecordingStream
from pg_cluster import _pg_shared_url, pg_clean_url, pg_server_url, pg_url  # noqa: F401
from talaria.testing.server import ScriptedProvider
from temporal_cluster import queue, temporal_target, workers  # noqa: F401

# Property tests judge the inputs, never the clock: no per-example deadline, and slow input
# generation on a loaded machine is not a failure.
settings.register_profile("talaria", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("talaria")

# The price cache of the test run's processes, not the user's (~/.cache/talaria).
os.environ.setdefault("TALARIA_CACHE_DIR", tempfile.mkdtemp(prefix="talaria-test-cache-"))


@pytest.fixture(scope="session", autouse=True)
def _test_run_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    """This test process's folder of temporary directories (one per pytest-xdist worker): the
    commands its tests start run in it, which is how cli_process.tagged_processes tells them
    from a parallel worker's."""
    os.environ["TALARIA_TEST_TMP"] = str(tmp_path_factory.getbasetemp())


@pytest.fixture
def provider() -> Iterator[ScriptedProvider]:
    """A started ScriptedProvider with an empty script (add steps with ``provider.add``)."""
    with ScriptedProvider() as server:
        yield server


@pytest.fixture
def recorder() -> RecordingStream:
    return RecordingStream()


SERVICES = (
    "bwrap", "postgres", "temporal", "browser", "npm", "model_server", "pty",
    "synapse", "dovecot", "prosody", "ngircd",
)  # fmt: skip
"""Markers of tests that need a real service; each also gets the umbrella marker `services`,
so `pytest -m "not services"` runs the part that needs none."""

SERVICE_FIXTURES = {
    "pg_server_url": "postgres",
    "pg_url": "postgres",
    "pg_clean_url": "postgres",
    "temporal_target": "temporal",
    "workers": "temporal",
    "world": "bwrap",  # tests/security/boundary_helpers.py: the sandbox-boundary tests
    "synapse": "synapse",  # tests/gateway/: the real chat servers
    "mail_server": "dovecot",
    "xmpp_server": "prosody",
    "irc_server": "ngircd",
}
"""A test that asks for one of these fixtures needs that service, marked or not."""


CHAT_SERVERS = ("synapse", "dovecot", "prosody", "ngircd")
"""The gateway's real chat servers: one worker runs each one's tests, so each starts once."""

INTEGRATION_FOLDERS = frozenset({"acp", "durable", "e2e", "mcp", "server", "bench"})
"""Folders whose tests run real servers and clients in processes of their own (an editor over
ACP, uvicorn, MCP servers, Temporal workers, the benches' scripted provider): all of them count
as `services`."""

TESTS = os.path.dirname(os.path.abspath(__file__))


def _slow_tests() -> frozenset[str]:
    """The test functions tests/slow.txt names (written by scripts/slow_tests.py)."""
    with open(os.path.join(TESTS, "slow.txt"), encoding="utf-8") as listing:
        return frozenset(line.strip() for line in listing if line.strip() and line[0] != "#")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow = _slow_tests()
    for item in items:
        if item.nodeid.split("[", 1)[0] in slow:
            item.add_marker("slow")
        for fixture, marker in SERVICE_FIXTURES.items():
            if fixture in item.fixturenames and item.get_closest_marker(marker) is None:
                item.add_marker(marker)
        folder = os.path.relpath(str(item.path), TESTS).split(os.sep)[0]
        if folder in INTEGRATION_FOLDERS or any(item.get_closest_marker(n) for n in SERVICES):
            item.add_marker("services")
        # Under pytest-xdist (--dist loadgroup) one worker takes all tests of a shared server,
        # so the run starts one Temporal dev server (and one PostgreSQL cluster) rather than two.
        if item.get_closest_marker("temporal"):
            item.add_marker(pytest.mark.xdist_group("temporal"))
        elif chat_server := next((n for n in CHAT_SERVERS if item.get_closest_marker(n)), None):
            item.add_marker(pytest.mark.xdist_group(chat_server))
        elif item.get_closest_marker("postgres") and not os.environ.get("TALARIA_TEST_PG_URL"):
            item.add_marker(pytest.mark.xdist_group("postgres"))
        elif item.get_closest_marker("model_server"):
            # The model server answers one request at a time: a second worker would only queue.
            item.add_marker(pytest.mark.xdist_group("model_server"))
