"""What telemetry and budgets cost per step: the loop_overhead tool loop, three ways.

Fresh agents run turns of 40 and of 2 model calls against the scripted provider (own process);
the marginal step is (T40 - T2) / 38, as in loop_overhead.py, in wall time and in this
process's CPU time (which other load on the machine disturbs less). Variants: telemetry off (the
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
import time
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
from loop_overhead import SHORT, marginal_step
from talaria_driver import noop

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


def turns(url: str, reps: int, lengths: list[int]) -> dict[str, list[dict[str, Any]]]:
    """Per variant, `reps` rounds of one turn per length on fresh agents, the variants
    interleaved so that a change in the machine's load hits them alike. Each turn records its
    wall time and the CPU time of this process (all its threads: the span exporter's too)."""
    from talaria import Agent

    def agent(home: str, config: dict[str, Any]) -> Any:
        return Agent(
            model=MODEL,
            base_url=url,
            api_key="x",
            toolsets=[],
            tools=[noop],
            home=home,
            cwd=home,
            config={"context.engine": "none", **config},
        )

    measured: dict[str, list[dict[str, Any]]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as home:
        for config in VARIANTS.values():
            with agent(home, config) as warm:
                warm.run_conversation("warm up")
        for _ in range(reps):
            for name, config in VARIANTS.items():
                for length in lengths:
                    with agent(home, config) as fresh:
                        cpu = time.process_time()
                        with stopwatch() as elapsed:
                            result = fresh.run_conversation(f"steps={length}")
                        cpu = time.process_time() - cpu
                    measured[name].append(
                        {
                            "steps": length,
                            "seconds": elapsed[0],
                            "cpu": cpu,
                            "api_calls": result["api_calls"],
                            "final": result["final_response"],
                        }
                    )
    return measured


def cpu_step(measured: list[dict[str, Any]], steps: int) -> float:
    """Marginal CPU seconds per step, as `marginal_step` does for wall time."""
    return marginal_step(measured, steps, key="cpu")


def import_cost(reps: int) -> float:
    """Median extra seconds `import talaria.telemetry.otel` adds to a fresh interpreter."""
    code = (
        "import time, talaria; t = time.perf_counter(); import talaria.telemetry.otel; "
        "print(time.perf_counter() - t)"
    )
    return median(
        [fresh_interpreter_seconds(sys.executable, code, {}, ".")[0] for _ in range(reps)]
    )


def run(steps: int = 40, reps: int = 5) -> list[Row]:
    _install_sdk()
    lengths = [steps, SHORT]
    notes: dict[str, Any] = {"steps per turn": steps, "reps": reps}
    rows = []
    with ProviderProcess(tool_loop_plan(steps)) as provider:
        measured = turns(provider.url, reps, lengths)
    for name, variant in measured.items():
        check_turns(name, variant, steps)
        rows.append(Row(f"{name}: CPU per step", cpu_step(variant, steps)))
        rows.append(Row(f"{name}: wall time per step", marginal_step(variant, steps)))
        notes[name] = [f"{t['seconds']:.3f}s/{t['cpu']:.3f}cpu" for t in variant]
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
