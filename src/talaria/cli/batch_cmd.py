"""`talaria batch tasks.jsonl --concurrency N [--output results.jsonl] [--temporal HOST:PORT]`.

Checks every line first, skips the ids the results file already holds, runs the rest (here,
or on a Temporal cluster), and shows a progress bar when stderr is a terminal. Exit codes: 0
every task completed, 2 some did not (or the input was bad), 130 interrupted (the finished
tasks are kept; run the same command again to do the rest).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from talaria.cli.main import EXIT_AGENT_FAILURE, EXIT_OK, whole_number
from talaria.cli.options import agent_kwargs


def add_batch_parser(commands: Any, add_model_options: Callable[[Any], None]) -> None:
    batch = commands.add_parser("batch", help="run many independent tasks from a JSONL file")
    batch.add_argument("tasks", help='JSONL file, one {"id": ..., "prompt": ...} a line')
    batch.add_argument(
        "--concurrency", "-n", type=whole_number(1, 10_000), default=4, help="tasks at a time"
    )
    batch.add_argument("--output", "-o", help="results JSONL (default: <tasks>.results.jsonl)")
    add_temporal_options(batch)
    add_model_options(batch)


def add_temporal_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("temporal")
    group.add_argument("--temporal", metavar="HOST:PORT", help="run on this Temporal cluster")
    group.add_argument("--task-queue", default="talaria", help="Temporal task queue")
    group.add_argument("--namespace", default="default", help="Temporal namespace")


def run_batch_command(args: argparse.Namespace) -> int:
    import asyncio

    from talaria.batch.tasks import BatchError, ResultsFile, default_output, load_tasks

    tasks_path = Path(args.tasks)
    try:
        tasks = load_tasks(tasks_path)
        results = ResultsFile(Path(args.output) if args.output else default_output(tasks_path))
        results.open()
    except BatchError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    options = agent_kwargs(args)
    options["source"] = "batch"
    try:
        with results, _progress(len(tasks), len(tasks) - len(results.done)) as advance:
            summary = asyncio.run(_dispatch(args, tasks, results, options, advance))
    except KeyboardInterrupt:
        print(
            f"talaria: interrupted; {len(results.done)} of {len(tasks)} tasks are in "
            f"{results.path}; run the same command again to do the rest",
            file=sys.stderr,
        )
        return 130
    print(summary.text(results), file=sys.stderr)
    code = EXIT_OK if summary.failed == 0 else EXIT_AGENT_FAILURE
    if args.temporal:
        from talaria.cli.durable_cmd import exit_now

        exit_now(code)
    return code


async def _dispatch(
    args: argparse.Namespace,
    tasks: list[Any],
    results: Any,
    options: dict[str, Any],
    advance: Callable[[Any, dict[str, Any]], None],
) -> Any:
    if args.temporal:
        from talaria.durable.batch import run_on_temporal
        from talaria.durable.client import connect

        client = await connect(args.temporal, args.namespace)
        return await run_on_temporal(
            client,
            args.task_queue,
            tasks,
            results,
            concurrency=args.concurrency,
            agent_options=options,
            on_done=advance,
        )
    from talaria.batch.local import run_local

    return await run_local(
        tasks, results, concurrency=args.concurrency, agent_options=options, on_done=advance
    )


@contextmanager
def _progress(total: int, todo: int) -> Iterator[Callable[[Any, dict[str, Any]], None]]:
    """A rich progress bar on a terminal; a silent counter otherwise."""
    if not sys.stderr.isatty():
        yield lambda task, line: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True)) as bar:
        job = bar.add_task("tasks", total=total, completed=total - todo)

        def advance(task: Any, line: dict[str, Any]) -> None:
            if not line.get("completed"):
                bar.console.print(f"[yellow]{task.id}: {line.get('turn_exit_reason')}[/]")
            bar.advance(job)

        yield advance
