"""Shared fixtures: a running scripted provider and a stream handler that records what it got."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from pg_cluster import _pg_shared_url, pg_clean_url, pg_server_url, pg_url  # noqa: F401
from talaria.testing.server import ScriptedProvider
from temporal_cluster import queue, temporal_target, workers  # noqa: F401

# The price cache of the test run's processes, not the user's (~/.cache/talaria).
os.environ.setdefault("TALARIA_CACHE_DIR", tempfile.mkdtemp(prefix="talaria-test-cache-"))


@dataclass
class RecordingStream:
    """A StreamHandler that keeps every delta, in order."""

    texts: list[str] = field(default_factory=list)
    reasonings: list[str] = field(default_factory=list)
    tool_calls: list[tuple[int, str, str]] = field(default_factory=list)
    arguments: dict[int, list[str]] = field(default_factory=dict)

    def text(self, delta: str) -> None:
        self.texts.append(delta)

    def reasoning(self, delta: str) -> None:
        self.reasonings.append(delta)

    def tool_call(self, index: int, call_id: str, name: str) -> None:
        self.tool_calls.append((index, call_id, name))

    def tool_arguments(self, index: int, delta: str) -> None:
        self.arguments.setdefault(index, []).append(delta)


@pytest.fixture
def provider() -> Iterator[ScriptedProvider]:
    """A started ScriptedProvider with an empty script (add steps with ``provider.add``)."""
    with ScriptedProvider() as server:
        yield server


@pytest.fixture
def recorder() -> RecordingStream:
    return RecordingStream()
