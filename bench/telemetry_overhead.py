"""What telemetry and budgets cost per step: the loop_overhead tool loop, three ways.

Fresh agents run turns of 40 and of 2 model calls against the scripted provider (own process);
the marginal step is (T40 - T2) / 38, as in loop_overhead.py. Variants: telemetry off (the
default: nothing imported), telemetry on (the OpenTelemetry SDK with a batch processor and an
exporter that drops what it gets, so the figure is talaria's and the SDK's in-process cost, not
a network's), and budgets on (`agent.max_cost_usd` and `agent.max_tokens_per_turn`, checked
before every model call). Also: the import time `telemetry.enabled` adds to a fresh process.

Run: python bench/telemetry_overhead.py [--steps 40] [--reps 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from typing import Any

from common import (
    MODEL,
    ProviderProcess,
    Row,
    check_turns,
    fresh_interpreter_seconds,
    median,
    report,
    stopwatch,
    tool_loop_plan,
)
from loop_overhead import SHORT, _noop_tool, marginal_step

VARIANTS: dict[str, dict[str, Any]] = {
    "telemetry off (default)": {},
    "telemetry on (OTel SDK, batch export)": {"telemetry.enabled": True},
    "budgets on (cost and tokens)": {
        "agent.max_cost_usd": 1000.0,
        "agent.max_tokens_per_turn": 10**9,
    },
}


def _install_sdk() -> None:
    """A program's own OpenTelemetry setup, with an exporter that drops every span (and
    metrics aggregated in memory, never exported)."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


def turns(url: str, config: dict[str, Any], reps: int, lengths: list[int]) -> list[dict[str, Any]]:
    from talaria import Agent

    def agent(home: str) -> Any:
        return Agent(model=MODEL, base_url=url, api_key="x", toolsets=[], tools=[_noop_tool()],
                     home=home, cwd=home, config={"context.engine": "none", **config})

    measured = []
    with tempfile.TemporaryDirectory() as home:
        with agent(home) as warm:
            warm.run_conversation("warm up")
        for _ in range(reps):
            for length in lengths:
                with agent(home) as fresh, stopwatch() as elapsed:
                    result = fresh.run_conversation(f"steps={length}")
                measured.append({"steps": length, "seconds": elapsed[0],
                                 "api_calls": result["api_calls"],
                                 "final": result["final_response"]})
    return measured


def import_cost(reps: int) -> float:
    """Median extra seconds `import talaria.telemetry.otel` adds to a fresh interpreter."""
    code = ("import time, talaria; t = time.perf_counter(); import talaria.telemetry.otel; "
            "print(time.perf_counter() - t)")
    return median([fresh_interpreter_seconds(sys.executable, code, {}, ".")[0]
                   for _ in range(reps)])


def run(steps: int = 40, reps: int = 5) -> list[Row]:
    _install_sdk()
    lengths = [steps, SHORT]
    notes: dict[str, Any] = {"steps per turn": steps, "reps": reps}
    rows = []
    with ProviderProcess(tool_loop_plan(steps)) as provider:
        for name, config in VARIANTS.items():
            measured = turns(provider.url, config, reps, lengths)
            check_turns(name, measured, steps)
            rows.append(Row(f"{name}: marginal wall time per step", marginal_step(measured, steps)))
            notes[name] = [round(t["seconds"], 4) for t in measured]
    rows.append(Row("import of the OpenTelemetry part (when enabled)", import_cost(reps)))
    report("telemetry_overhead", f"Telemetry and budgets ({steps}-step tool loop)", rows, notes)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    run(args.steps, args.reps)


if __name__ == "__main__":
    main()
