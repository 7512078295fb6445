"""`--output-format stream-json`: every engine event as one JSON object per line.

Each line has a `type`: the event's class name in snake_case (`text_delta`, `tool_started`,
`approval_requested`, ...), followed by the event's own fields. The last line is always a
`result` object with the usage. The schema is in docs/cli.md ("Scripting"); new event types may
be added, existing fields are not renamed.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Mapping
from typing import Any, TextIO

from talaria.events import SubagentEvent

RESULT_FIELDS = (
    "final_response",
    "completed",
    "interrupted",
    "failed",
    "turn_exit_reason",
    "error",
    "session_id",
    "task_id",
    "model",
    "provider",
    "api_mode",
    "api_calls",
    "usage",
)
"""What the final `result` line carries (the full history is left to --output-format json)."""

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def event_type(event: Any) -> str:
    """`TextDelta` -> `text_delta`."""
    return snake_case(type(event).__name__)


def snake_case(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def event_record(event: Any) -> dict[str, Any]:
    """A sub-agent's event (`subagent_event`) keeps the type of the event it wraps."""
    is_event = dataclasses.is_dataclass(event) and not isinstance(event, type)
    fields = dataclasses.asdict(event) if is_event else {}
    if isinstance(event, SubagentEvent):
        fields["event"] = event_record(event.event)
    return {"type": event_type(event), **fields}


def shipped_record(event: Mapping[str, Any]) -> dict[str, Any]:
    """The record of an event that came as `{"type": "<class name>", ...fields}` (a durable
    turn's, from its workflow): the same line as `event_record` writes for the event."""
    return {**event, "type": snake_case(str(event.get("type", "")))}


def result_record(result: Mapping[str, Any], exit_code: int) -> dict[str, Any]:
    record: dict[str, Any] = {"type": "result", "exit_code": exit_code}
    record.update({key: result.get(key) for key in RESULT_FIELDS})
    return record


class JsonLines:
    """Writes records as JSON lines, one flush per line (events come from several threads)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str)
        with self._lock:
            self.out.write(line + "\n")
            self.out.flush()

    def event(self, event: Any) -> None:
        self.write(event_record(event))
