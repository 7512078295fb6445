"""`talaria -p "..."` (also `-q`, or under `chat`): one question, the answer on stdout.

Piped stdin is appended to the prompt as context (`git diff | talaria -p "review this"`).
`--output-format text` streams the answer when stdout is a terminal and prints it whole
otherwise; `json` prints the result dict; `stream-json` prints every event as a JSON line and
a final `result` line; either way the turn is read as one stream of events (`Agent.events`).
Progress goes to stderr; model text reaching a terminal loses its control sequences. Exit
codes: 0 the agent answered; 2 the agent failed, the input was bad, or the configuration or
the session store cannot be used (the reason is one line on stderr); 1 talaria itself crashed;
130 / 143 stopped by SIGINT / SIGTERM (what was complete is stored).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from talaria.cli.main import EXIT_AGENT_FAILURE, EXIT_CRASH, EXIT_OK, EXIT_SIGINT, fail
from talaria.cli.options import agent_kwargs
from talaria.cli.safe_text import clean
from talaria.cli.signals import SignalStop, exit_now
from talaria.cli.stream_json import JsonLines, result_record
from talaria.events import TextDelta, ToolStarted

if TYPE_CHECKING:
    from talaria.agent import Agent
    from talaria.core import TurnResult
    from talaria.turn_stream import TurnEvents

log = logging.getLogger("talaria.cli")

STDIN_LIMIT = 2_000_000
"""Characters of piped input taken (more would not fit any model's window anyway)."""


class InputError(ValueError):
    """The command line or stdin gives nothing to ask."""


def compose_prompt(query: str, stdin: TextIO) -> str:
    """The prompt, with piped stdin appended as context (stdin alone when no prompt)."""
    piped = "" if stdin.isatty() else stdin.read(STDIN_LIMIT)
    if not piped.strip():
        if not query.strip():
            raise InputError('no prompt: pass one (talaria -p "...") or pipe text into talaria')
        return query
    if not query.strip():
        return piped.strip("\n")
    return f"{query}\n\n<stdin>\n{piped.strip(chr(10))}\n</stdin>"


def run_oneshot(args: argparse.Namespace) -> int:
    holder: dict[str, Agent] = {}
    on_stop: list[Callable[[], None]] = []

    def stop(name: str) -> None:
        if "agent" not in holder:
            raise KeyboardInterrupt  # nothing was asked yet: leave at once
        holder["agent"].interrupt(reason=name)
        for then in on_stop:
            then()

    with SignalStop(stop) as signals:
        code = _run(args, holder, signals, on_stop)
        if signals.received is not None:
            exit_now(signals.received)
    return code


def _run(
    args: argparse.Namespace,
    holder: dict[str, Agent],
    signals: SignalStop,
    on_stop: list[Callable[[], None]],
) -> int:
    from talaria.config import ConfigError
    from talaria.providers.errors import ProviderError
    from talaria.skills.invoke import with_skill
    from talaria.store.base import AmbiguousSession, SessionNotFound, StoreError

    output = Output(args.output_format)
    try:
        if args.input_format == "stream-json":
            return _converse(args, output, holder, signals, on_stop)
        prompt = compose_prompt(args.query or "", sys.stdin)
        result = _ask(
            args,
            output,
            holder,
            lambda agent: output.follow(agent.events(with_skill(prompt, agent.skills))),
        )
        assert result is not None
    except (ConfigError, ProviderError, SessionNotFound, AmbiguousSession, ValueError) as exc:
        return output.failure(str(getattr(exc, "message", None) or exc), EXIT_AGENT_FAILURE)
    except StoreError as exc:
        return output.failure(f"{exc}; the question was not sent", EXIT_AGENT_FAILURE)
    except KeyboardInterrupt:
        stopped = f"stopped by {signals.name or 'SIGINT'} before the question was sent"
        return output.failure(stopped, signals.exit_code or EXIT_SIGINT)
    except Exception as exc:
        if os.environ.get("TALARIA_DEBUG"):
            raise
        return output.failure(f"crashed: {type(exc).__name__}: {exc}", EXIT_CRASH)
    unsaved = holder["agent"].unsaved_messages
    if signals.received is not None:
        return output.report(result, unsaved, stopped_by=(signals.name, signals.exit_code))
    return output.report(result, unsaved)


def _converse(
    args: argparse.Namespace,
    output: Output,
    holder: dict[str, Agent],
    signals: SignalStop,
    on_stop: list[Callable[[], None]],
) -> int:
    """`--input-format stream-json`: the messages of stdin, each run reported as it ends;
    the exit code is the first failing run's."""
    from talaria.cli.stream_input import converse

    if output.lines is None:
        raise InputError("--input-format stream-json needs --output-format stream-json")
    codes: list[int] = []

    def report(result: TurnResult) -> None:
        unsaved = holder["agent"].unsaved_messages
        stopped = (signals.name, signals.exit_code) if signals.received is not None else None
        codes.append(output.report(result, unsaved, stopped_by=stopped))

    def run(agent: Agent) -> Coroutine[Any, Any, TurnResult | None]:
        return converse(agent, args.query or "", output.follow, report, output.error, on_stop)

    if _ask(args, output, holder, run) is None:
        raise InputError("no user message on stdin (--input-format stream-json)")
    return next((code for code in codes if code != EXIT_OK), EXIT_OK)


def _ask(
    args: argparse.Namespace,
    output: Output,
    holder: dict[str, Agent],
    run: Callable[[Agent], Coroutine[Any, Any, TurnResult | None]],
) -> TurnResult | None:
    from talaria.agent import Agent
    from talaria.background import run_sync
    from talaria.cli.session_setup import current_setup, plan_resume, record_setup
    from talaria.store.base import StoreError

    plan = plan_resume(args)
    for note in plan.notes:
        output.progress(note)
    agent = Agent(session_id=plan.session_id, **agent_kwargs(args))
    holder["agent"] = agent
    with agent:
        result = run_sync(run(agent))
        if result is None:
            return None
        try:
            record_setup(agent.store, result["session_id"], current_setup(args, agent.config))
        except StoreError as exc:  # the turn is stored; only the resume defaults are not
            log.warning("session %s: setup not recorded: %s", result["session_id"], exc)
    return result


def stopped_line(name: str, result: Mapping[str, Any], unsaved: int) -> str:
    """What a signal left behind, truthfully."""
    kept = (
        f"{unsaved} message(s) of this turn could not be saved"
        if unsaved
        else f"what was complete is saved (talaria --resume {result.get('session_id')})"
    )
    return f"interrupted by {name}; {kept}"


class Output:
    """Where the answer, the progress and the events go, per --output-format."""

    def __init__(self, output_format: str) -> None:
        self.format = output_format
        self.lines = JsonLines(sys.stdout) if output_format == "stream-json" else None
        self.streaming = output_format == "text" and sys.stdout.isatty()
        self.streamed = ""
        self.show_progress = output_format == "text" and sys.stderr.isatty()

    async def follow(self, turn: TurnEvents) -> TurnResult:
        """Show the turn's events as they come (per the format); its result at the end."""
        async for event in turn:
            if self.lines is not None:
                self.lines.event(event)
            if self.streaming and isinstance(event, TextDelta):
                self._delta(event.text)
            elif self.show_progress and isinstance(event, ToolStarted):
                self._tool(event)
        assert turn.result is not None  # the iteration ended without an exception
        return turn.result

    def _delta(self, text: str) -> None:
        text = clean(text)
        self.streamed += text
        sys.stdout.write(text)
        sys.stdout.flush()

    def _tool(self, event: ToolStarted) -> None:
        if self.streamed and not self.streamed.endswith("\n"):
            self._delta("\n")
        self.progress(f"  ⚙ {event.name}")

    def progress(self, message: str) -> None:
        print(f"talaria: {message}" if not message.startswith(" ") else message, file=sys.stderr)

    def report(
        self,
        result: Mapping[str, Any],
        unsaved: int = 0,
        stopped_by: tuple[str, int | None] | None = None,
    ) -> int:
        """Print the outcome; `unsaved` messages the store lacks make an answer a failure,
        `stopped_by` (signal name, exit code) says a signal ended the turn."""
        ok = result["completed"] or result["turn_exit_reason"] == "max_iterations_reached"
        code = EXIT_OK if ok else EXIT_SIGINT if result.get("interrupted") else EXIT_AGENT_FAILURE
        if unsaved and code == EXIT_OK:
            code = EXIT_AGENT_FAILURE
        if stopped_by is not None:
            code = stopped_by[1] or code
        if self.lines is not None:
            self.lines.write(result_record(result, code))
        elif self.format == "json":
            import json

            print(json.dumps(result, ensure_ascii=False, default=str))
        else:
            self._answer(result.get("final_response") or "")
        line = self._outcome(result, ok, unsaved, stopped_by)
        if line:
            fail(line)
        return code

    @staticmethod
    def _outcome(
        result: Mapping[str, Any], ok: bool, unsaved: int, stopped_by: tuple[str, int | None] | None
    ) -> str:
        if stopped_by is not None:
            return stopped_line(stopped_by[0], result, unsaved)
        if not ok:
            reason = str(result.get("error") or result["turn_exit_reason"])
            lost = f"; {unsaved} message(s) of this turn were not saved" if unsaved else ""
            return reason + lost
        if unsaved:
            return f"the answer is above, but {unsaved} message(s) of this turn were not saved"
        return ""

    def _answer(self, text: str) -> None:
        if sys.stdout.isatty():
            text = clean(text)
        if self.streaming and self.streamed:
            if not text or _words(self.streamed).endswith(_words(text)):
                if not self.streamed.endswith("\n"):
                    sys.stdout.write("\n")
                return
            sys.stdout.write("\n")  # the answer differs from what streamed: print it whole
        if text:
            print(text)

    def error(self, message: str) -> None:
        """A problem that ends nothing (a bad input line): on stderr, and as an `error`
        line for stream-json."""
        fail(message)
        if self.lines is not None:
            self.lines.write({"type": "error", "message": message})

    def failure(self, message: str, code: int) -> int:
        """One line on stderr; for the JSON formats also a result object on stdout."""
        fail(message)
        if self.format != "text":
            import json

            failed = {"completed": False, "failed": True, "turn_exit_reason": "error"}
            record = result_record({**failed, "error": message}, code)
            if self.format == "json":
                record.pop("type")
            print(json.dumps(record, ensure_ascii=False, default=str), flush=True)
        return code


def _words(text: str) -> str:
    """`text` with its whitespace runs as single spaces: the streamed copy of an answer has a
    line break before each tool's progress line that the answer itself does not."""
    return " ".join(text.split())
