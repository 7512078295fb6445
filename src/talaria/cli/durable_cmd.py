"""`talaria worker --temporal HOST:PORT --task-queue Q` and `talaria chat -q ... --temporal`.

The worker runs durable turns with this machine's model settings and keys until SIGINT or
SIGTERM. `chat --temporal` starts one turn on the cluster, shows tool progress on stderr,
asks approvals and clarify questions on the terminal (none are asked without one: the
headless rule denies approvals), and prints the answer like `chat -q`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from talaria.cli.main import EXIT_AGENT_FAILURE, EXIT_OK, whole_number
from talaria.cli.options import agent_kwargs, resume_ref


def add_worker_parser(commands: Any, add_model_options: Callable[[Any], None]) -> None:
    from talaria.cli.batch_cmd import add_temporal_options

    worker = commands.add_parser("worker", help="run durable turns for a Temporal cluster")
    add_temporal_options(worker)
    worker.add_argument(
        "--max-concurrent-activities",
        type=whole_number(1, 100_000),
        default=100,
        help="model and tool calls at once",
    )
    add_model_options(worker)


def run_worker_command(args: argparse.Namespace) -> int:
    import asyncio
    import signal

    from talaria.durable.client import DurableError
    from talaria.durable.worker import run_worker

    if not args.temporal:
        print("talaria: worker needs --temporal HOST:PORT", file=sys.stderr)
        return EXIT_AGENT_FAILURE

    async def serve() -> None:
        stop, ready = asyncio.Event(), asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        waiting = asyncio.ensure_future(ready.wait())
        serving = asyncio.ensure_future(
            run_worker(args.temporal, args.task_queue, {**agent_kwargs(args), "source": "temporal"},
                       namespace=args.namespace, stop=stop, ready=ready,
                       max_concurrent_activities=args.max_concurrent_activities)
        )  # fmt: skip
        await asyncio.wait({waiting, serving}, return_when=asyncio.FIRST_COMPLETED)
        if ready.is_set():
            print(f"talaria worker: serving {args.task_queue} on {args.temporal}", file=sys.stderr)
        await serving

    try:
        asyncio.run(serve())
    except DurableError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    return EXIT_OK


def run_durable_chat(args: argparse.Namespace) -> int:
    import asyncio

    from talaria.cli.oneshot import Output
    from talaria.durable.client import DurableError

    output = Output(args.output_format)
    if args.api_key:
        return output.failure("--api-key stays on the workers; configure it there", 2)
    try:
        result = asyncio.run(_durable_turn(args, output))
    except (DurableError, ValueError) as exc:
        exit_now(output.failure(str(exc), EXIT_AGENT_FAILURE))
    exit_now(output.report(result))


def exit_now(code: int) -> NoReturn:
    """Exit without interpreter finalization: temporalio's core threads can abort it
    ("PyGILState_Release ... finalizing") after all our work is done and flushed."""
    import os

    if "opentelemetry" in sys.modules:  # telemetry was on: export the spans before leaving
        from talaria.telemetry.export import flush

        flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


async def _durable_turn(args: argparse.Namespace, output: Any) -> dict[str, Any]:
    import asyncio

    from talaria.cli.stream_json import shipped_record
    from talaria.durable.client import connect, start_turn

    options = agent_kwargs(args)
    overrides = {key: options.get(key) for key in ("model", "provider", "base_url", "api_mode")}
    overrides.update(toolsets=options.get("toolsets"), max_turns=options.get("max_iterations"))
    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    client = await connect(args.temporal, args.namespace, traced=_tracing(options))
    turn = await start_turn(
        client,
        args.task_queue,
        args.query,
        session=resume_ref(args),
        agent=overrides,
        answers=interactive,
    )
    if interactive:
        print(f"  turn {turn.id}", file=sys.stderr)

    async def show(event: dict[str, Any]) -> None:
        if output.lines is not None:  # --output-format stream-json: every event, as it comes
            output.lines.write(shipped_record(event))
        kind = event["type"]
        if kind == "ToolStarted" and sys.stderr.isatty():
            print(f"  ⚙ {event['name']}", file=sys.stderr, flush=True)
        elif kind in ("ApprovalRequested", "ClarifyRequested") and interactive:
            await turn.respond(event["request_id"], await asyncio.to_thread(_ask, event))

    return await turn.follow(show)


def _tracing(options: dict[str, Any]) -> bool:
    """With telemetry on, talaria's exporters are set up here too: the turn's trace starts
    in this process (the span that starts the workflow)."""
    from talaria.config import Config
    from talaria.telemetry.base import telemetry_enabled

    if not telemetry_enabled(Config.load(options.get("home"), overrides=options.get("config"))):
        return False
    from talaria.telemetry.export import ensure_providers

    ensure_providers()
    return True


def _ask(event: dict[str, Any]) -> str:
    if event["type"] == "ApprovalRequested":
        prompt = f"  approve {event['command']!r} ({event['reason']})? [once/session/always/deny] "
        answer = input(prompt).strip().lower()
        return answer if answer in ("once", "session", "always") else "deny"
    choices = f" {event['choices']}" if event.get("choices") else ""
    return input(f"  {event['question']}{choices} ")
