"""Where spans and metrics go: the user's own providers if they set any, else ours over OTLP.

A program that already configured OpenTelemetry (its own `TracerProvider`/`MeterProvider`, a
vendor's distro, `opentelemetry-instrument`) keeps its setup: talaria only asks it for a tracer
and a meter. Otherwise talaria installs one provider of each per process, configured the
standard way by the `OTEL_*` environment variables: `OTEL_EXPORTER_OTLP_ENDPOINT` (and the
per-signal `..._TRACES_/..._METRICS_ENDPOINT`), `OTEL_EXPORTER_OTLP_HEADERS`,
`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_EXPORTER` /
`OTEL_METRICS_EXPORTER` (`otlp`, `console` or `none`), `OTEL_METRIC_EXPORT_INTERVAL`.
`console` writes to stderr: stdout carries answers (`--output-format json`) and protocols
(`talaria mcp serve`), which a span in the middle would break.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

from opentelemetry import metrics, trace

log = logging.getLogger("talaria.telemetry")

SERVICE_NAME = "talaria"
_lock = threading.Lock()


def ensure_providers() -> None:
    """Install talaria's providers where the program has not set its own (once)."""
    with _lock:
        if _unset(trace.get_tracer_provider()):
            trace.set_tracer_provider(_tracer_provider())
        if _unset(metrics.get_meter_provider()):
            metrics.set_meter_provider(_meter_provider())


def flush() -> None:
    """Export what is buffered now (for a process that leaves without running `atexit`)."""
    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        force_flush = getattr(provider, "force_flush", None)
        if force_flush is not None:
            force_flush()


def _unset(provider: object) -> bool:
    """True for the API's placeholder, which stands in until a program sets a provider (the
    metrics API does not export its class, hence the name check)."""
    return type(provider).__name__ in ("ProxyTracerProvider", "_ProxyMeterProvider")


def _resource() -> object:
    from opentelemetry.sdk.resources import Resource

    named = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": SERVICE_NAME}
    return Resource.create(named)


def _exporter_choice(signal: str) -> str:
    choice = os.environ.get(f"OTEL_{signal}_EXPORTER", "otlp").split(",")[0].strip().lower()
    protocol = os.environ.get(
        f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    )
    if choice == "otlp" and protocol.strip().lower() == "grpc":
        log.warning("OTLP over gRPC is not bundled with talaria[otel]; exporting over HTTP")
    if choice not in ("otlp", "console", "none"):
        log.warning("OTEL_%s_EXPORTER=%s is not supported; using otlp", signal, choice)
        return "otlp"
    return choice


def _tracer_provider() -> trace.TracerProvider:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    provider = TracerProvider(resource=_resource())  # type: ignore[arg-type]
    choice = _exporter_choice("TRACES")
    if choice == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    elif choice == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
    return provider


def _meter_provider() -> metrics.MeterProvider:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        MetricExporter,
        PeriodicExportingMetricReader,
    )

    choice = _exporter_choice("METRICS")
    exporter: MetricExporter | None = None
    if choice == "otlp":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        exporter = OTLPMetricExporter()
    elif choice == "console":
        exporter = ConsoleMetricExporter(out=sys.stderr)
    readers = [PeriodicExportingMetricReader(exporter)] if exporter is not None else []
    return MeterProvider(resource=_resource(), metric_readers=readers)  # type: ignore[arg-type]
