"""A durable turn's `invoke_agent` span, recorded by the worker that finishes the turn.

The workflow records no spans itself (it does no I/O, and a replay would record them again),
so it hands `finish_turn` what a normal turn's span holds. The worker records the span there
through the same `Telemetry.turn` a normal turn uses, so name and attributes are the same,
with the turn's start time, so it covers the whole turn.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from talaria.core import Usage
from talaria.core.telemetry import TurnStart


def turn_record(
    *,
    session_id: str,
    task_id: str,
    model: str,
    provider: str,
    user_message: str,
    started: datetime,
    state: Any,
) -> dict[str, Any]:
    """In the workflow: the span's fields, as plain data for the `finish_turn` activity."""
    return {
        "session_id": session_id,
        "task_id": task_id,
        "model": model,
        "provider": provider,
        "user_message": user_message,
        "start_ns": int(started.timestamp() * 1e9),
        "exit_reason": state.exit_reason,
        "api_calls": state.api_calls,
        "final_response": state.final_response,
    }


def record_turn_span(telemetry: Any, agent_name: str, record: dict[str, Any], finish: Any) -> None:
    """On the worker: the span from the turn's start until now (nothing when telemetry is
    off on this worker)."""
    if not record or not telemetry.enabled:
        return
    start = TurnStart(
        agent_name,
        record["session_id"],
        record["task_id"],
        record["model"],
        record["provider"],
        record["user_message"],
        record["start_ns"],
    )
    with telemetry.turn(start) as observed:
        observed.turn_done(
            record["exit_reason"],
            Usage.from_dict(finish.usage),
            record["api_calls"],
            record["final_response"],
            finish.model,
            finish.provider,
        )
