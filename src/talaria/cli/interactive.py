"""`talaria chat`: the interactive terminal agent.

Two threads. The main thread owns the terminal: a prompt_toolkit input line that stays open
while the agent works (so typing queues the next message, /stop interrupts, and approval or
clarify questions are answered on the same line). A worker thread runs the turns and the
session-changing slash commands, one at a time, in the order they were entered. Output goes
through prompt_toolkit's stdout proxy, which prints above the input line. The UI is a pure
client of engine events: a turn is read as its `agent.events()` stream (on the process's
shared loop, where the agent's connections live), and it never makes loop decisions.
"""

from __future__ import annotations

import argparse
import logging
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from prompt_toolkit import PromptSession
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.styles import Style

from talaria.cli.main import EXIT_AGENT_FAILURE, EXIT_OK, ROUTED_WARNINGS
from talaria.cli.options import agent_kwargs
from talaria.cli.prompts import QuestionBroker, bind_single_keys
from talaria.cli.render import clip, terminal_width
from talaria.cli.slash import (
    SlashCompleter,
    SlashRegistry,
    build_registry,
    parse_command,
    typing_a_command,
)

if TYPE_CHECKING:
    from talaria.agent import Agent
    from talaria.cli.model_choice import ModelChoice
    from talaria.cli.render import Renderer
    from talaria.cli.session_setup import ResumePlan
    from talaria.core import Message, TurnResult
    from talaria.events import Event
    from talaria.tools.base import Tool
    from talaria.turn_stream import TurnEvents

log = logging.getLogger("talaria.cli")

Job = Callable[[], None]
_STOP_WORKER = None
ANSWERS = ("approval", "clarify")
"""The requests the chat answers on its input line."""


class _CtrlC(Exception):
    """Ctrl+C at an empty, idle prompt."""


def run_interactive(args: argparse.Namespace) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(
            'talaria: chat needs a terminal; in scripts use `talaria chat -q "..."`',
            file=sys.stderr,
        )
        return EXIT_AGENT_FAILURE
    from talaria.config import Config, ConfigError

    try:
        config = Config.load(args.home)
    except ConfigError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    quiet_logging(config.home)
    from talaria.cli.session_setup import plan_resume
    from talaria.store.base import StoreError
    from talaria.store.factory import check_writable

    try:
        plan = plan_resume(args)
    except StoreError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    if not (args.model or config.model.default):
        from talaria.cli.first_run import ensure_model

        if not ensure_model(args, config):
            return EXIT_AGENT_FAILURE
    chat = Chat(args, config.home)
    try:
        chat.agent.store.list_sessions(limit=1)  # damaged, read-only, locked: say so now
        check_writable(chat.agent.store)
    except StoreError as exc:
        chat.agent.close()
        print(f"talaria: {exc}", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    chat.resume(plan)
    return chat.run()


def quiet_logging(home: Path) -> None:
    """Library warnings go to <home>/logs/chat.log, never onto the chat screen (a plugin that
    did not load is shown as a notice in the chat)."""
    ROUTED_WARNINGS.discard("talaria.plugins.load")
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    target: logging.Handler
    try:
        (home / "logs").mkdir(parents=True, exist_ok=True)
        target = logging.FileHandler(home / "logs" / "chat.log", encoding="utf-8", delay=True)
    except OSError:
        target = logging.NullHandler()
    target.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(target)
    root.setLevel(logging.WARNING)
    logging.captureWarnings(True)


def queued_lines(waiting: list[str], shown: int = 3) -> list[str]:
    """The waiting messages under the spinner, one line each (the first few)."""
    width = max(20, terminal_width() - 6)
    lines = [f"  ↳ {clip(' '.join(text.split()), width)}" for text in waiting[:shown]]
    if len(waiting) > shown:
        lines.append(f"  ↳ … {len(waiting) - shown} more (/queue lists them)")
    if waiting:
        lines.append("  (Alt+↑ takes the last one back to edit · /queue edits, drops, clears)")
    return lines


class Chat:
    """The REPL: prompt loop on the main thread, turns on a worker; the `CommandHost` of the
    slash commands."""

    def __init__(self, args: argparse.Namespace, home: Path) -> None:
        self.args = args
        self.home = home
        self.registry: SlashRegistry = build_registry()
        self.last_result: TurnResult | None = None
        self.broker = QuestionBroker(
            show=self._show_question, wake=self._invalidate, respond=self._respond
        )
        self.renderer: Renderer
        self._choice: ModelChoice | None = None
        """The endpoint /model switched to (None: the one the chat started with)."""
        self._resume_notes: list[str] = []
        self._jobs: queue.Queue[tuple[Job, bool] | None] = queue.Queue()
        """(job, visible): visible jobs are what the user asked for; the rest is warm-up."""
        self._busy = threading.Event()
        self._waiting = 0
        self._waiting_lock = threading.Lock()
        self._quitting = False
        self._ctrl_c_armed = False
        self._titles: list[tuple[str, str]] = []
        self._prompt: PromptSession[str] | None = None
        self.agent = self._make_agent(None)

    # ---- setup ------------------------------------------------------------------------

    def _make_agent(self, session_id: str | None) -> Agent:
        from talaria.agent import Agent

        kwargs = agent_kwargs(self.args)
        if self._choice is not None:
            kwargs.update(self._choice.agent_kwargs())
        return Agent(session_id=session_id, **kwargs)

    def _respond(self, request_id: str, answer: str) -> bool:
        return self.agent.respond(request_id, answer)

    def resume(self, plan: ResumePlan) -> None:
        """Point the agent at the session --resume/--continue resolved to (its setup is
        already in the options)."""
        if plan.session_id is not None:
            self.agent.session_id = plan.session_id
        self._resume_notes = plan.notes

    def _on_event(self, event: Event) -> None:
        """One engine event: drawn, and a question queued for the input line. A drawing bug
        is logged: it must not end the turn whose stream it reads."""
        try:
            self.renderer(event)
            self.broker.on_event(event)
        except Exception:
            log.exception("showing %s failed", type(event).__name__)

    @contextmanager
    def _hearing(self) -> Iterator[None]:
        """Events outside a turn's stream, for a job between turns: a plugin that did not load
        (assembly), what /compress does. The chat declares that it answers the agent's
        questions meanwhile, so that assembly offers clarify."""
        stop = self.agent.subscribe(self._on_event, ANSWERS)
        try:
            yield
        finally:
            stop()

    # ---- the prompt loop (main thread) -------------------------------------------------

    def run(self) -> int:
        """The chat until /quit, Ctrl+D or Ctrl+C twice (exit 0), or SIGTERM (exit 143: the
        turn is stopped and its processes killed first)."""
        import signal

        from talaria.cli.main import fail
        from talaria.cli.render import Renderer
        from talaria.cli.signals import SignalStop

        terminated = SignalStop(self._terminate, (signal.SIGTERM,))
        with terminated, patch_stdout(raw=True):
            self.renderer = Renderer(sys.stdout, color=True, cwd=self.agent.cwd)
            self._prompt = self._make_prompt()
            self._banner()
            worker = threading.Thread(target=self._work, name="talaria-chat-turns", daemon=True)
            worker.start()
            threading.Thread(target=self._tick, name="talaria-chat-spinner", daemon=True).start()
            self._jobs.put((self._warm_up, False))
            while not self._quitting:
                try:
                    line = self._prompt.prompt(self._message)
                    self._ctrl_c_armed = False
                    self._handle(line)
                except (_CtrlC, KeyboardInterrupt):
                    if self._ctrl_c():
                        break
                except EOFError:
                    break
            self._shutdown(worker)
        if terminated.exit_code is not None:
            fail(f"interrupted by {terminated.name}; what was complete is saved")
            return terminated.exit_code
        return EXIT_OK

    def _terminate(self, name: str) -> None:
        """SIGTERM: stop the turn (its commands are killed), then leave the prompt."""
        self.interrupt(name)
        self._quitting = True
        app = self._prompt.app if self._prompt is not None else None
        if app is not None and app.is_running and app.loop is not None:
            app.loop.call_soon_threadsafe(lambda: app.exit(exception=EOFError()))

    def _ctrl_c(self) -> bool:
        """Ctrl+C outside the input line's own binding (e.g. while output was printing, when
        the terminal is briefly in cooked mode). True when the chat should end."""
        if self._busy.is_set():
            self.interrupt(None)
            return False
        if self._ctrl_c_armed:
            return True
        self._ctrl_c_armed = True
        self.renderer.note("· press Ctrl+C again to exit (or /quit)")
        return False

    def _make_prompt(self) -> PromptSession[str]:
        self.home.mkdir(parents=True, exist_ok=True)
        return PromptSession(
            history=FileHistory(str(self.home / "chat_history")),
            completer=SlashCompleter(self.registry, lambda: self._titles),
            complete_while_typing=typing_a_command,
            key_bindings=self._key_bindings(),
            erase_when_done=True,
            prompt_continuation="  ",
            reserve_space_for_menu=8,
            style=Style.from_dict(
                {
                    "prompt": "bold ansicyan",
                    "status": "ansibrightblack",
                    "question": "bold ansiyellow",
                }
            ),
        )

    def _key_bindings(self) -> KeyBindings:
        bindings = KeyBindings()

        @bindings.add("c-c")
        def _ctrl_c(event: KeyPressEvent) -> None:
            if self._busy.is_set():
                self.interrupt(None)
            elif event.current_buffer.text:
                event.current_buffer.reset()
            else:
                event.app.exit(exception=_CtrlC())

        @bindings.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @bindings.add("escape", "up")
        def _edit_last_queued(event: KeyPressEvent) -> None:
            text = "" if event.current_buffer.text else self.take_back_last()
            if text:
                event.current_buffer.text = text
                event.current_buffer.cursor_position = len(text)

        bind_single_keys(bindings, self.broker, lambda chosen: self.renderer.note(f"  → {chosen}"))
        return bindings

    def _message(self) -> FormattedText:
        question = self.broker.pending()
        if question is not None:
            return FormattedText([("class:question", question.label)])
        waiting = self.agent.queued_messages if self._busy.is_set() else []
        self.renderer.queued = len(waiting)
        status = self.renderer.status()
        lines = [status] if status else []
        lines += queued_lines(waiting)
        prompt = [("class:prompt", "› ")]
        return FormattedText(
            [("class:status", "\n".join(lines) + "\n"), *prompt] if lines else prompt
        )

    def _handle(self, line: str) -> None:
        parsed = parse_command(line)
        if parsed is not None and self.registry.get(parsed[0]) is not None:
            self._command(*parsed)
        elif self.broker.pending() is not None:
            answer = self.broker.answer(line)
            if answer is not None:
                self.renderer.note(f"  → {answer}")
            else:
                self.renderer.note("  please answer with one of the choices", "yellow")
        elif parsed is not None:
            self._command(*parsed)
        elif line.strip():
            self.submit(line)

    def _command(self, name: str, arg: str) -> None:
        command = self.registry.get(name)
        if command is None and self._skill(name, arg):
            return
        if command is None:
            suggestion = self.registry.suggest(name)
            hint = f" — did you mean /{suggestion}?" if suggestion else " — /help lists them"
            self.renderer.note(f"unknown command /{name}{hint}", "yellow")
            return
        self.renderer.note(f"› /{name} {arg}".rstrip(), "bold cyan")
        if command.immediate:
            self._safely(lambda: command.handler(self, arg))
            return
        if self.busy:
            self.renderer.note(f"· /{name} runs after the current turn")
        self._enqueue(lambda: self._between_turns(lambda: command.handler(self, arg)))

    def _between_turns(self, job: Job) -> None:
        """A slash command on the worker (no turn runs then: it hears the agent directly)."""
        with self._hearing():
            job()

    def _skill(self, name: str, arg: str) -> bool:
        """`/<skill-name> [request]`: send the skill's instructions and the request as the
        next message (False: no skill has that name)."""
        from talaria.skills.invoke import expand_invocation

        try:
            message = expand_invocation(f"/{name} {arg}", self.agent.skills)
        except ValueError as exc:
            self.renderer.error(str(exc))
            return True
        if message is None:
            return False
        self.renderer.note(f"› /{name} {arg}".rstrip(), "bold cyan")
        self.submit(message)
        return True

    def _tick(self) -> None:
        """Redraw the spinner while something runs."""
        while not self._quitting:
            if self._busy.wait(0.5):
                self._invalidate()
                time.sleep(0.1)

    def _invalidate(self) -> None:
        """Redraw from any thread. Between two prompts the app has no loop: nothing to draw
        then (prompt_toolkit would raise from the spinner's thread)."""
        app = self._prompt.app if self._prompt is not None else None
        if app is None or not app.is_running or app.loop is None:
            return
        try:
            app.invalidate()
        except RuntimeError:  # the prompt closed between the check and the call
            return

    def _show_question(self, text: str, style: str) -> None:
        self.renderer.flush()
        self.renderer.note(text, style, wrap=True)

    def _banner(self) -> None:
        from talaria import __version__

        label, problem = self._model_spec()
        self.renderer.note(f"talaria {__version__} · {label}", "bold")
        if problem:
            self.renderer.note(f"! {problem}", "yellow", wrap=True)
        for note in self._resume_notes:
            self.renderer.note(f"· {note}", "yellow", wrap=True)
        self.renderer.note(
            "/help for commands · Esc Enter: new line · Ctrl+C: interrupt · Ctrl+D: exit"
        )
        if self.agent.session_id:
            self._recap(self.agent.session_id)
            self._kept_queue_note("were queued when this session last ran: they run after your "
                                  "next message (/queue run: now)")  # fmt: skip

    def _kept_queue_note(self, what: str) -> None:
        waiting = self.agent.queued_messages
        if waiting:
            self.renderer.note(f"· {len(waiting)} message(s) {what}", "yellow", wrap=True)
            for position, text in enumerate(waiting, 1):
                self.renderer.note(f"· queued {position}: {' '.join(text.split())}")

    def _shutdown(self, worker: threading.Thread) -> None:
        self._quitting = True
        self.broker.close()
        if self._busy.is_set():
            self.agent.interrupt()
        self._drain()
        self._jobs.put(_STOP_WORKER)
        worker.join(timeout=30)
        self._kept_queue_note("stay queued with the session: they run when you resume it")
        session_id = self.agent.session_id
        self.agent.close()
        if session_id and self.agent.store.get_session(session_id) is not None:
            self.renderer.note(f"resume with: talaria chat --resume {session_id}")

    # ---- the worker (turns and session commands, in order) -----------------------------

    def _enqueue(self, job: Job) -> None:
        with self._waiting_lock:
            self._waiting += 1
        self._jobs.put((job, True))

    def _drain(self) -> None:
        while True:
            try:
                self._jobs.get_nowait()
            except queue.Empty:
                return

    def _work(self) -> None:
        while True:
            item = self._jobs.get()
            if item is _STOP_WORKER:
                return
            job, visible = item
            if not visible:
                job()
                continue
            with self._waiting_lock:
                self._waiting -= 1
            self._busy.set()
            try:
                self._safely(job)
                self._safely(self._refresh_titles)
            finally:
                self._busy.clear()
                self._invalidate()

    def _warm_up(self) -> None:
        """While the user types the first message: load the markdown renderer and assemble the
        agent (SDK client, tools), so the first answer does not wait for imports. A failure
        here is left for the first turn to report."""
        import rich.markdown  # noqa: F401

        try:
            self._refresh_titles()
            with self._hearing():
                self.agent.warm_up()
        except Exception:
            log.debug("warm-up failed; the first turn will report it", exc_info=True)

    def _safely(self, job: Job) -> None:
        """Run a job; a failure is one red line on screen and a traceback in the log."""
        try:
            job()
        except Exception as exc:
            log.exception("chat job failed")
            self.renderer.abort_turn()
            self.renderer.error(
                f"{type(exc).__name__}: {exc} (details in {self.home / 'logs' / 'chat.log'})"
            )

    def _turn(self, text: str) -> None:
        self.renderer.echo_user(text)
        self._run_turns(lambda: self.agent.events(text, answers=ANSWERS))

    def _queued_turns(self) -> None:
        """Run what waits in the agent's queue (a running turn usually already ran it; each
        message is echoed when its turn starts)."""
        if self.agent.queued_messages:
            self._run_turns(lambda: self.agent.queued_events(answers=ANSWERS))

    def _run_turns(self, turns: Callable[[], TurnEvents]) -> None:
        from talaria.background import run_sync
        from talaria.cli.session_setup import current_setup, record_setup
        from talaria.config import ConfigError
        from talaria.providers.errors import ProviderError
        from talaria.store.base import StoreError

        self.renderer.begin_turn()
        started = time.monotonic()
        try:
            result = run_sync(self._follow(turns()))
        except (ConfigError, ProviderError, StoreError, ValueError) as exc:
            self.renderer.abort_turn()
            self.renderer.error(getattr(exc, "message", None) or str(exc))
            return
        self.last_result = result
        self.agent.session_id = result["session_id"]
        self.renderer.end_turn(result, time.monotonic() - started)
        overrides = self._choice.agent_kwargs() if self._choice else None
        setup = current_setup(self.args, self.agent.config, overrides)
        record_setup(self.agent.store, result["session_id"], setup)

    async def _follow(self, turn: TurnEvents) -> TurnResult:
        async for event in turn:
            self._on_event(event)
        assert turn.result is not None  # the iteration ended without an exception
        return turn.result

    def _refresh_titles(self) -> None:
        sessions = self.agent.store.list_sessions(limit=50)
        self._titles = [(info.title or "", info.id) for info in sessions]

    def _recap(self, session_id: str) -> None:
        """What a resumed session was about: its title and its last exchange (the answer
        rendered as markdown, as it was shown the first time)."""
        from talaria.store.base import content_text

        store = self.agent.store
        info = store.get_session(session_id)
        if info is None:
            return
        label = f"“{info.title}” ({info.id})" if info.title else info.id
        self.renderer.note(f"· resumed {label} · {info.message_count} messages", "green")
        messages = store.load_messages(session_id)
        start = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
        for message in messages[start:]:
            text = content_text(message.get("content")).strip()
            if message.get("role") == "user":
                self.renderer.echo_user(text)
            elif message.get("role") == "assistant" and text:
                self.renderer.markdown(text)

    # ---- CommandHost --------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._busy.is_set() or self._waiting > 0

    def history(self) -> list[Message]:
        """The session's messages, also before the first turn of a resumed session."""
        if self.agent.messages:
            return self.agent.messages
        session_id = self.agent.session_id
        if session_id and self.agent.store.get_session(session_id) is not None:
            return self.agent.store.load_messages(session_id)
        return []

    def truncate(self, keep: int) -> None:
        self.agent.truncate(keep)

    def switch_session(self, session_id: str | None) -> None:
        self.agent.new_session()
        if session_id is not None:
            self.agent.session_id = session_id
            self._recap(session_id)

    def model_choices(self) -> list[ModelChoice]:
        from talaria.cli.model_choice import model_choices

        return model_choices(agent_kwargs(self.args), self.agent.config)

    def current_model(self) -> ModelChoice:
        if self._choice is not None:
            return self._choice
        choices = self.model_choices()
        if choices:
            return choices[0]
        from talaria.cli.model_choice import ModelChoice

        return ModelChoice("start", str(self.args.model or ""))

    def switch_model(self, choice: ModelChoice) -> None:
        """The next turns go to `choice`: a new agent on the same session, in place before the
        old one closes (the screen reads `self.agent` meanwhile, for the queue under the
        spinner, and must never find a closed store)."""
        self._choice = choice
        old = self.agent
        new = self._make_agent(old.session_id)
        new.approvals.mode = old.approvals.mode
        new.approvals.session_grants |= old.approvals.session_grants
        self.last_result = None
        self.agent = new
        old.close()

    def model_label(self) -> str:
        label, problem = self._model_spec()
        return f"{label} (! {problem})" if problem else label

    def _model_spec(self) -> tuple[str, str | None]:
        """`provider:model · base URL` as configured (or as the last turn really used), and
        what stops it from working, if something visibly does (a missing key, ...)."""
        if self.last_result and self.last_result.get("model"):
            return f"{self.last_result['provider']}:{self.last_result['model']}", None
        from talaria.cli.options import configured_spec
        from talaria.providers.errors import ProviderError

        config = self.agent.config
        args = {**agent_kwargs(self.args), **(self._choice.agent_kwargs() if self._choice else {})}
        try:
            spec = configured_spec(args, config)
        except (ProviderError, ValueError) as exc:
            model = args["model"] or config.model.default
            named = args["provider"] or config.model.provider
            label = f"{named}:{model}" if named else str(model)
            return label, getattr(exc, "message", None) or str(exc)
        return f"{spec.label} · {spec.base_url}", None

    def tools(self) -> dict[str, Tool]:
        return self.agent.tools

    def compress(self, focus: str | None) -> tuple[int, int] | None:
        """Compress now: (messages before, after), or None when there is nothing to compress."""
        before = len(self.agent.messages)
        self.renderer.begin_turn()
        try:
            changed = self.agent.compress(focus)
        finally:
            self.renderer.abort_turn()
        return (before, len(self.agent.messages)) if changed else None

    def submit(self, text: str) -> None:
        """A message from the user: while something runs it waits in the agent's queue, kept
        with the session in the store (a crash of the chat loses none of it); otherwise it
        starts a turn."""
        if not self.busy:
            self._enqueue(lambda: self._turn(text))
            return
        self.agent.queue(text)
        self.renderer.note(f"· queued: {' '.join(text.split())}")
        self._enqueue(self._queued_turns)

    def queued_messages(self) -> list[str]:
        """What waits, for the screen: a store that cannot say now shows nothing (the turn
        that uses it reports the fault) rather than ending the chat."""
        from talaria.store.base import StoreError

        try:
            return self.agent.queued_messages
        except StoreError:
            return []

    def clear_queue(self) -> int:
        count = self.agent.clear_queue()
        self._invalidate()
        return count

    def drop_queued(self, number: int) -> bool:
        waiting = self.agent.queued
        if not 1 <= number <= len(waiting):
            return False
        dropped = self.agent.remove_queued(waiting[number - 1].id)
        self._invalidate()
        return dropped

    def edit_queued(self, number: int, text: str) -> bool:
        waiting = self.agent.queued
        return 1 <= number <= len(waiting) and self.agent.edit_queued(waiting[number - 1].id, text)

    def run_queue(self) -> None:
        self._enqueue(self._queued_turns)

    def take_back_last(self) -> str:
        """The last waiting message, taken off the queue ('' when none waits)."""
        waiting = self.agent.queued
        if waiting and self.agent.remove_queued(waiting[-1].id):
            return waiting[-1].text
        return ""

    def steer(self, text: str) -> bool:
        """Steer the running turn; False when none runs (or it just ended)."""
        from talaria.loop.steering import TurnMismatch

        running = self.agent.running_turn
        if running is None:
            return False
        try:
            self.agent.steer(text, turn_id=running)
        except TurnMismatch:
            return False
        return True

    def interrupt(self, reason: str | None) -> None:
        self.broker.cancel()
        self.agent.interrupt(reason=reason)

    def toggle_reasoning(self) -> bool:
        self.renderer.show_reasoning = not self.renderer.show_reasoning
        return self.renderer.show_reasoning

    def clear_screen(self) -> None:
        self.renderer.write("\x1b[H\x1b[2J\x1b[3J")

    def quit(self) -> None:
        self._quitting = True
