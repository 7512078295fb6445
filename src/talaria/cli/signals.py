"""SIGINT and SIGTERM while a command runs an agent.

The first signal stops the turn the way `agent.interrupt()` does: the model call is abandoned,
running commands and every process they started are killed, and what is complete stays
stored. The command then exits 130 (SIGINT) or 143 (SIGTERM) with one line. A second signal
means "now": the processes the agent started are killed and the process exits at once, still
with one line and no traceback.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from talaria.cli.main import EXIT_SIGINT, EXIT_SIGTERM, fail

EXIT_CODES = {signal.SIGINT: EXIT_SIGINT, signal.SIGTERM: EXIT_SIGTERM}


class SignalStop:
    """Installs the handlers for the duration of a `with` block (main thread only)."""

    def __init__(
        self, on_first: Callable[[str], None], numbers: tuple[signal.Signals, ...] = ()
    ) -> None:
        self._on_first = on_first
        self._numbers = numbers or tuple(EXIT_CODES)
        self.received: signal.Signals | None = None
        self._previous: dict[signal.Signals, Any] = {}

    @property
    def exit_code(self) -> int | None:
        return EXIT_CODES[self.received] if self.received is not None else None

    @property
    def name(self) -> str:
        return self.received.name if self.received is not None else ""

    def __enter__(self) -> SignalStop:
        if threading.current_thread() is threading.main_thread():
            for number in self._numbers:
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.received is not None:
            return  # stopping: a further signal must still mean "now", until the process exits
        for number, previous in self._previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(number, previous)
        self._previous.clear()

    def _handle(self, number: int, frame: FrameType | None) -> None:
        received = signal.Signals(number)
        if self.received is None:
            self.received = received
            self._on_first(received.name)
            return
        stop_now(received)


def stop_now(received: signal.Signals) -> None:
    """Kill what the agent started and exit immediately (the second signal)."""
    fail(f"stopped by a second {received.name}; completed messages are stored")
    exit_now(received)


def exit_now(received: signal.Signals) -> None:
    """Exit with the signal's code without interpreter finalization: once stopped by a signal
    the work is done, and finalization resets the handlers, so a further signal arriving
    during its (slow) module teardown would kill the process with no code of ours."""
    from talaria.tools.process_tracking import kill_everything

    kill_everything()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_CODES.get(received, EXIT_SIGTERM))
