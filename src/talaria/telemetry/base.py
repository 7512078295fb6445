"""Which telemetry an agent records into: the no-op seam of `talaria.core.telemetry`, or
OpenTelemetry when `telemetry.enabled` says so (or a parent turn in this context records)."""

from __future__ import annotations

import contextvars
import os
from typing import TYPE_CHECKING

from talaria.core.telemetry import NO_TELEMETRY, Telemetry

if TYPE_CHECKING:
    from talaria.config import Config

ACTIVE: contextvars.ContextVar[Telemetry | None] = contextvars.ContextVar(
    "talaria_telemetry", default=None
)
"""The telemetry of the turn running in this context: a child agent started from one of its
tools records into the same traces, whatever its own configuration says."""


def telemetry_enabled(config: Config, env: dict[str, str] | None = None) -> bool:
    """`telemetry.enabled` (`TALARIA_OTEL=1` sets it); `OTEL_SDK_DISABLED=true` wins."""
    environ = os.environ if env is None else env
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(config.telemetry.enabled)


def telemetry_for(config: Config) -> Telemetry:
    """The telemetry an agent with this configuration records into (imports OpenTelemetry
    only when it is on)."""
    inherited = ACTIVE.get()
    if inherited is not None:
        return inherited
    if not telemetry_enabled(config):
        return NO_TELEMETRY
    from talaria.telemetry.otel import OtelTelemetry

    return OtelTelemetry.from_config(config)
