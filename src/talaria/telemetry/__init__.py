"""Traces and metrics of what an agent does, for the tools people already run (OTLP).

The loop, the model caller and the tool executor call one seam, a `Telemetry` object, at the
few points where a span starts and ends. The default does nothing and imports nothing; the
OpenTelemetry one (`talaria[otel]`) is built only when `telemetry.enabled` (or `TALARIA_OTEL=1`)
says so, so an agent without telemetry never imports `opentelemetry`.
"""

from talaria.core.telemetry import NO_TELEMETRY, Scope, Telemetry
from talaria.telemetry.base import telemetry_for

__all__ = ["NO_TELEMETRY", "Scope", "Telemetry", "telemetry_for"]
