"""`talaria` entry point: parses arguments and dispatches to one command module.

Imports stay inside the commands so that `talaria --version` and the first prompt are fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from talaria import __version__

EXIT_OK, EXIT_CRASH, EXIT_AGENT_FAILURE = 0, 1, 2
EXIT_SIGINT, EXIT_SIGTERM = 130, 143

EXIT_CODES_HELP = """\
one shot:
  talaria -p "question"            print the answer and exit (also -q, or under `chat`)
  git diff | talaria -p "review"   piped stdin is appended to the prompt as context
  echo "question" | talaria        piped stdin alone is the prompt
  --output-format text|json|stream-json   (--json = --output-format json)
  --input-format stream-json       user messages as JSON lines on stdin, also mid-turn

exit codes:
  0    the agent answered
  1    talaria itself crashed
  2    the agent failed, or bad input (unknown session, bad config, no prompt)
  130  interrupted (SIGINT, Ctrl+C)
  143  terminated (SIGTERM)
"""


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number in [low, high], else a usage error naming the range
    (a huge value would otherwise reach a socket or the database and overflow there)."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"expected a whole number from {low} to {high}, got {text!r}"
            )
        return value

    parse.__name__ = "whole number"  # argparse names the type in its messages
    return parse


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model")
    group.add_argument("-m", "--model", help="model id as the provider spells it")
    group.add_argument("--provider", help="openai | anthropic | openrouter | custom | ...")
    group.add_argument("--base-url", help="endpoint URL (OpenAI modes include /v1)")
    group.add_argument("--api-key", help="API key (default: from the environment or config)")
    group.add_argument(
        "--api-mode", choices=["chat_completions", "codex_responses", "anthropic_messages"]
    )
    group.add_argument("--toolsets", help="comma-separated toolsets to enable ('' for none)")
    group.add_argument(
        "--skill",
        action="append",
        metavar="NAME",
        help="give the model this skill's instructions from the start (repeatable)",
    )
    group.add_argument(
        "--max-turns", type=whole_number(1, 1_000_000), help="iteration budget per turn"
    )
    group.add_argument(
        "--yolo",
        action="store_true",
        help="run commands without asking (the hard floor still holds, and nothing runs "
        "outside the sandbox: escalations are refused)",
    )
    group.add_argument(
        "--sandbox",
        choices=["read-only", "workspace-write", "full-access"],
        help="where commands may write and whether they reach the network "
        "(default: sandbox.mode, workspace-write)",
    )
    group.add_argument("--no-stream", action="store_true", help="do not stream the answer")
    group.add_argument(
        "--lean",
        action="store_true",
        help="lean prompt for small context windows: short system prompt, fewer and shorter "
        "tool schemas (automatic below prompt.lean_below tokens)",
    )
    group.add_argument("--home", help="data directory (default $TALARIA_HOME or ~/.talaria)")


def _add_chat_options(chat: argparse.ArgumentParser) -> None:
    chat.add_argument(
        "-p",
        "-q",
        "--print",
        "--query",
        dest="query",
        nargs="?",
        const="",
        metavar="PROMPT",
        help="one shot: answer PROMPT (plus piped stdin) and exit",
    )
    chat.add_argument(
        "--output-format",
        dest="output_format",
        choices=["text", "json", "stream-json"],
        default="text",
        help="one shot: the answer as text, one JSON result, or JSON events one per line",
    )
    chat.add_argument(
        "--input-format",
        dest="input_format",
        choices=["text", "stream-json"],
        default="text",
        help="one shot: stream-json reads user messages as JSON lines on stdin while the agent "
        'works (queued, or steering with "steer": true); needs --output-format stream-json',
    )
    chat.add_argument(
        "--json",
        dest="output_format",
        action="store_const",
        const="json",
        help="the same as --output-format json",
    )
    chat.add_argument("-r", "--resume", metavar="ID|TITLE|latest", help="resume a session")
    chat.add_argument(
        "-c",
        "--continue",
        dest="continue_last",
        action="store_true",
        help="resume the most recent session started in this directory (else the most recent)",
    )
    _add_model_options(chat)
    from talaria.cli.batch_cmd import add_temporal_options

    add_temporal_options(chat)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The help layout of `talaria` and `talaria chat`, given the terminal's width: left to
    find it, argparse imports shutil (with its archive modules, 5 ms of every one-shot) as it
    builds the parser."""

    def __init__(self, prog: str, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("width", _columns() - 2)
        super().__init__(prog, *args, **kwargs)


def _columns() -> int:
    """What `shutil.get_terminal_size` says: $COLUMNS, else the terminal's width, else 80."""
    import os

    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size((sys.__stdout__ or sys.stdout).fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or only `command`'s part of it: that is all a run of `command`
    parses, and building every command's options costs a one-shot milliseconds."""
    parser = argparse.ArgumentParser(
        prog="talaria",
        description="A Python agent runtime.",
        epilog=EXIT_CODES_HELP,
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"talaria {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, add in _PARSERS.items():
        if command is None or name == command:
            add(commands)
    return parser


def _add_chat(commands: Any) -> None:
    chat = commands.add_parser(
        "chat",
        help="talk to the agent (interactive, or -p one shot)",
        epilog=EXIT_CODES_HELP,
        formatter_class=_HelpFormatter,
    )
    _add_chat_options(chat)


def _add_sessions(commands: Any) -> None:
    sessions = commands.add_parser("sessions", help="list, show, export, rename, delete sessions")
    sessions.add_argument("action", choices=["list", "show", "export", "rename", "delete"])
    sessions.add_argument("ref", nargs="?", help="session id, title or 'latest'")
    sessions.add_argument("value", nargs="?", help="new title (rename)")
    sessions.add_argument("--format", choices=["jsonl", "markdown"], default="jsonl")
    sessions.add_argument("--limit", type=whole_number(1, 1_000_000), default=20)
    sessions.add_argument("--home")


def _add_config(commands: Any) -> None:
    config = commands.add_parser("config", help="show or change settings")
    config.add_argument("action", choices=["show", "set", "path"])
    config.add_argument("key", nargs="?")
    config.add_argument("value", nargs="?")
    config.add_argument("--home")


def _add_doctor(commands: Any) -> None:
    doctor = commands.add_parser("doctor", help="what is configured, reachable and missing")
    doctor.add_argument("--home")


def _add_usage(commands: Any) -> None:
    usage = commands.add_parser("usage", help="tokens and cost by model, day or session")
    usage.add_argument(
        "--since", type=_since, metavar="7d|24h|30m|2w|DATE|all", help="default: all"
    )
    usage.add_argument("--by", choices=["model", "day", "session"], default="model")
    usage.add_argument("--json", action="store_true", help="print the report as JSON")
    usage.add_argument("--home")


def _add_demo(commands: Any) -> None:
    commands.add_parser("demo", help="one real turn against a local scripted model (offline)")


def _add_serve(commands: Any) -> None:
    serve = commands.add_parser("serve", help="HTTP server: OpenAI-compatible API, runs, web page")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=whole_number(0, 65535), help="port (default 8642; 0 picks a free one)"
    )
    _add_model_options(serve)


def _add_mcp(commands: Any) -> None:
    from talaria.cli.mcp_cmd import add_parser as add_mcp_parser

    add_mcp_parser(commands, _add_model_options)


def _add_batch(commands: Any) -> None:
    from talaria.cli.batch_cmd import add_batch_parser

    add_batch_parser(commands, _add_model_options)


def _add_worker(commands: Any) -> None:
    from talaria.cli.durable_cmd import add_worker_parser

    add_worker_parser(commands, _add_model_options)


def _add_gateway(commands: Any) -> None:
    from talaria.cli.gateway_cmd import add_gateway_parser

    add_gateway_parser(commands, _add_model_options)


def _add_acp(commands: Any) -> None:
    acp = commands.add_parser(
        "acp", help="serve the Agent Client Protocol on stdio (Zed, JetBrains, other editors)"
    )
    _add_model_options(acp)


def _add_hooks(commands: Any) -> None:
    from talaria.cli.hooks_cmd import add_parser as add_hooks_parser

    add_hooks_parser(commands)


_PARSERS: dict[str, Callable[[Any], None]] = {
    "chat": _add_chat,
    "sessions": _add_sessions,
    "config": _add_config,
    "doctor": _add_doctor,
    "usage": _add_usage,
    "demo": _add_demo,
    "serve": _add_serve,
    "mcp": _add_mcp,
    "batch": _add_batch,
    "worker": _add_worker,
    "acp": _add_acp,
    "hooks": _add_hooks,
    "gateway": _add_gateway,
}
"""Each command's part of the command line, in the order `talaria --help` lists them."""


def _since(text: str) -> float | None:
    from talaria.cli.usage import parse_since

    return parse_since(text)


def _run_chat(args: argparse.Namespace) -> int:
    if args.query is None and not sys.stdin.isatty():
        args.query = ""  # `echo question | talaria`: the piped text is the prompt
    if args.input_format == "stream-json" and (args.temporal or args.query is None):
        where = "with --temporal" if args.temporal else "without -p"
        print(f"talaria: --input-format stream-json does not run {where}", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    if args.temporal:
        from talaria.cli.durable_cmd import run_durable_chat

        if args.query is None:
            print("talaria: --temporal runs one turn: give it with -q", file=sys.stderr)
            return EXIT_AGENT_FAILURE
        return run_durable_chat(args)
    if args.query is not None:
        from talaria.cli.oneshot import run_oneshot

        return run_oneshot(args)
    from talaria.cli.interactive import run_interactive

    return run_interactive(args)


def _run_sessions(args: argparse.Namespace) -> int:
    from talaria.cli.sessions import run_sessions

    return run_sessions(args)


def _run_config(args: argparse.Namespace) -> int:
    from talaria.cli.config_cmd import run_config

    return run_config(args)


def _run_doctor(args: argparse.Namespace) -> int:
    from talaria.cli.doctor import run_doctor

    return run_doctor(args)


def _run_usage(args: argparse.Namespace) -> int:
    from talaria.cli.usage import run_usage

    return run_usage(args)


def _run_hooks(args: argparse.Namespace) -> int:
    from talaria.cli.hooks_cmd import run_hooks

    return run_hooks(args)


def _run_demo(args: argparse.Namespace) -> int:
    from talaria.cli.demo import run_demo

    return run_demo(args)


def _run_serve(args: argparse.Namespace) -> int:
    from talaria.cli.serve_cmd import run_serve

    return run_serve(args)


def _run_worker(args: argparse.Namespace) -> int:
    from talaria.cli.durable_cmd import run_worker_command

    return run_worker_command(args)


def _run_batch(args: argparse.Namespace) -> int:
    from talaria.cli.batch_cmd import run_batch_command

    return run_batch_command(args)


def _run_mcp(args: argparse.Namespace) -> int:
    from talaria.cli.mcp_cmd import run_mcp

    return run_mcp(args)


def _run_acp(args: argparse.Namespace) -> int:
    from talaria.cli.acp_cmd import run_acp

    return run_acp(args)


def _run_gateway(args: argparse.Namespace) -> int:
    from talaria.cli.gateway_cmd import run_gateway_command

    return run_gateway_command(args)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "chat": _run_chat,
    "sessions": _run_sessions,
    "config": _run_config,
    "doctor": _run_doctor,
    "demo": _run_demo,
    "usage": _run_usage,
    "serve": _run_serve,
    "mcp": _run_mcp,
    "batch": _run_batch,
    "worker": _run_worker,
    "acp": _run_acp,
    "hooks": _run_hooks,
    "gateway": _run_gateway,
}


_TOP_LEVEL = frozenset({"-h", "--help", "--version"})


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if not words or (words[0] not in COMMANDS and words[0] not in _TOP_LEVEL):
        words = ["chat", *words]  # `talaria -p "..."`, `talaria -m model`: chat options
    args = build_parser(words[0] if words[0] in COMMANDS else None).parse_args(words)
    return run_guarded(COMMANDS[args.command], args)


def fail(message: object) -> None:
    """The one line a failure gets on stderr (control characters removed, folded)."""
    from talaria.cli.safe_text import one_line

    print(f"talaria: {one_line(str(message))}", file=sys.stderr, flush=True)


ROUTED_WARNINGS = {"talaria.config", "talaria.plugins.load"}
"""Library loggers whose records a command prints on stderr: an unknown config key, a plugin
that did not load. The interactive chat shows the plugin's as a notice instead."""


def _route_library_warnings() -> None:
    """Library log records stay off the terminal (the command prints its own one line), except
    the warnings of `ROUTED_WARNINGS`, which the user must see. Records still reach the root
    logger, where a command may send them (the chat's log file, `talaria acp`'s stderr)."""
    import logging

    class ConfigWarnings(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.name in ROUTED_WARNINGS and record.levelno >= logging.WARNING:
                fail(f"warning: {record.getMessage()}")

    library = logging.getLogger("talaria")
    if not any(type(handler).__name__ == "ConfigWarnings" for handler in library.handlers):
        library.addHandler(ConfigWarnings())


def run_guarded(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command; a bad configuration or an unusable store is one line and exit 2, any
    other failure one line and exit 1 (the traceback only with TALARIA_DEBUG=1)."""
    import os

    from talaria.config_schema import ConfigError
    from talaria.store.base import StoreError

    _route_library_warnings()
    try:
        return command(args)
    except (ConfigError, StoreError) as exc:
        fail(exc)
        return EXIT_AGENT_FAILURE
    except KeyboardInterrupt:
        fail("interrupted")
        return EXIT_SIGINT
    except Exception as exc:
        if os.environ.get("TALARIA_DEBUG"):
            raise
        fail(f"crashed: {type(exc).__name__}: {exc}")
        return EXIT_CRASH


if __name__ == "__main__":
    sys.exit(main())
