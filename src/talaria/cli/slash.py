"""Slash commands: one registry that the chat dispatches through, completes from and lists
in /help.

A command is either `immediate` (safe while a turn runs: it runs at once on the prompt's
thread) or not (it changes the session, so it runs on the turn thread, after the turn in
progress). Commands talk to the chat through the small `CommandHost` protocol, which keeps
them testable without a terminal.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from prompt_toolkit.application import get_app
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition

if TYPE_CHECKING:
    from talaria.agent import Agent
    from talaria.cli.model_choice import ModelChoice
    from talaria.cli.render import Renderer
    from talaria.core import Message, TurnResult
    from talaria.store.base import SessionInfo
    from talaria.tools.base import Tool

_COMMAND = re.compile(r"^/([a-z][a-z0-9-]*)(?:\s+(.*))?$", re.DOTALL)


class CommandHost(Protocol):
    """What a command may ask of the chat."""

    agent: Agent
    renderer: Renderer
    registry: SlashRegistry
    last_result: TurnResult | None

    @property
    def busy(self) -> bool: ...

    def history(self) -> list[Message]: ...

    def truncate(self, keep: int) -> None:
        """Keep only the first `keep` messages of the session, in memory and in the store."""

    def switch_session(self, session_id: str | None) -> None:
        """Resume `session_id` on the next message, or start a new session for None."""

    def switch_model(self, choice: ModelChoice) -> None: ...

    def model_choices(self) -> list[ModelChoice]:
        """The starting endpoint, the main model, the fallbacks, the named providers."""

    def current_model(self) -> ModelChoice: ...

    def model_label(self) -> str: ...

    def clear_screen(self) -> None: ...

    def tools(self) -> dict[str, Tool]: ...

    def compress(self, focus: str | None) -> tuple[int, int] | None:
        """Compress now: (messages before, after), or None when nothing changed."""

    def submit(self, text: str) -> None:
        """Queue `text` as the next user message."""

    def queued_messages(self) -> list[str]:
        """The messages waiting for the running turn to end, in order."""

    def clear_queue(self) -> int:
        """Take back the waiting messages; how many there were."""

    def drop_queued(self, number: int) -> bool:
        """Take back the waiting message `number` (from 1); False when there is none."""

    def edit_queued(self, number: int, text: str) -> bool:
        """New words for the waiting message `number`; False when there is none."""

    def run_queue(self) -> None:
        """Run the waiting messages now (after what runs)."""

    def steer(self, text: str) -> bool:
        """Add `text` to the running turn (its next model call reads it); False when no
        turn runs."""

    def interrupt(self, reason: str) -> None: ...

    def toggle_reasoning(self) -> bool: ...

    def quit(self) -> None: ...


Handler = Callable[[CommandHost, str], None]


@dataclass(frozen=True, slots=True)
class SlashCommand:
    name: str
    summary: str
    handler: Handler
    usage: str = ""
    immediate: bool = False
    completes_sessions: bool = False


class SlashRegistry:
    def __init__(self) -> None:
        self._commands: dict[str, SlashCommand] = {}

    def add(self, command: SlashCommand) -> None:
        if command.name in self._commands:
            raise ValueError(f"/{command.name} is already registered")
        self._commands[command.name] = command

    def get(self, name: str) -> SlashCommand | None:
        return self._commands.get(name)

    def commands(self) -> list[SlashCommand]:
        return list(self._commands.values())

    def suggest(self, name: str) -> str | None:
        close = difflib.get_close_matches(name, list(self._commands), n=1, cutoff=0.5)
        return close[0] if close else None

    def help_text(self) -> str:
        width = max(len(f"/{c.name} {c.usage}".rstrip()) for c in self._commands.values())
        return "\n".join(
            f"  {f'/{c.name} {c.usage}'.rstrip().ljust(width)}  {c.summary}"
            for c in self._commands.values()
        )


def parse_command(line: str) -> tuple[str, str] | None:
    """(name, argument) for a slash command; None for a message ('/etc/hosts is…' is text)."""
    match = _COMMAND.match(line.strip())
    if match is None:
        return None
    return match.group(1), (match.group(2) or "").strip()


def split_last_exchange(messages: Sequence[Mapping[str, Any]]) -> tuple[int, str] | None:
    """How many messages come before the last user message, and that message's text (None:
    no turn yet)."""
    from talaria.store.base import content_text

    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index, content_text(messages[index].get("content"))
    return None


# ---- the commands -------------------------------------------------------------------


def _help(host: CommandHost, arg: str) -> None:
    host.renderer.write(host.registry.help_text())
    host.renderer.note("  Enter sends · Esc Enter adds a line · Ctrl+C interrupts · Ctrl+D exits")


def _new(host: CommandHost, arg: str) -> None:
    host.switch_session(None)
    host.renderer.note("· new session (the next message starts it)")


def _sessions(host: CommandHost, arg: str) -> None:
    from talaria.cli.render import terminal_width
    from talaria.cli.sessions import session_table

    host.renderer.write(
        session_table(host.agent.store.list_sessions(limit=10), width=terminal_width())
    )


def _resume(host: CommandHost, arg: str) -> None:
    from talaria.store.base import StoreError

    if not arg:
        _sessions(host, "")
        host.renderer.note("· /resume <id|title|latest> picks one")
        return
    try:
        session_id = host.agent.store.resolve(arg)
    except StoreError as exc:
        host.renderer.error(str(exc))
        return
    host.switch_session(session_id)


def _current_session(host: CommandHost) -> SessionInfo | None:
    """The stored session the chat is in (None before the first message creates it)."""
    session_id = host.agent.session_id
    return host.agent.store.get_session(session_id) if session_id else None


def _title(host: CommandHost, arg: str) -> None:
    from talaria.store.base import StoreError

    info = _current_session(host)
    if info is None:
        host.renderer.note("· the session starts with your first message; set its title after")
        return
    if not arg:
        host.renderer.note(f"· title: {info.title or '(none)'} · /title <text> sets it")
        return
    try:
        host.agent.store.rename(info.id, arg)
    except StoreError as exc:
        host.renderer.error(str(exc))
        return
    host.renderer.note(f"· titled “{arg}”: resume it with /resume {arg}")


def _model(host: CommandHost, arg: str) -> None:
    from talaria.cli.model_choice import pick

    choices = host.model_choices()
    current = host.current_model()
    if not arg:
        host.renderer.note(f"· model: {host.model_label()}")
        width = max(len(choice.name) for choice in choices) if choices else 0
        for number, choice in enumerate(choices, 1):
            mark = "●" if choice.agent_kwargs() == current.agent_kwargs() else " "
            where = f"  {choice.base_url}" if choice.base_url else ""
            host.renderer.write(
                f"  {mark} {number}. {choice.name.ljust(width)}  {choice.label}{where}"
            )
        host.renderer.note("  /model <number | name | [provider:]model> switches")
        return
    host.switch_model(pick(choices, arg, current))
    host.renderer.note(f"· next message goes to {host.model_label()}")


def _compress(host: CommandHost, arg: str) -> None:
    counts = host.compress(arg or None)
    if counts is None:
        host.renderer.note("· nothing to compress")
    else:
        host.renderer.note(f"· compressed {counts[0]} messages into {counts[1]}")


def _usage(host: CommandHost, arg: str) -> None:
    from talaria.cli.render import usage_summary

    info = _current_session(host)
    if info is None:
        host.renderer.note("· no usage yet")
        return
    from talaria.cli.usage import session_report

    totals = info.usage or {}
    host.renderer.write(f"  session {info.id} · {info.message_count} messages")
    report = session_report(host.agent.store, info.id)
    for line in (report or "").splitlines():
        host.renderer.write(f"  {line}")
    host.renderer.write(f"  session total, sub-agents included: {usage_summary(totals)}")
    last = host.last_result
    if last and last.get("session_id") == info.id:
        host.renderer.write(f"  last turn  {usage_summary(last.get('usage') or {})}")


def _tools(host: CommandHost, arg: str) -> None:
    from talaria.cli.render import clip, terminal_width

    tools = host.tools()
    if not tools:
        host.renderer.note("· no tools enabled")
        return
    width = max(len(name) for name in tools)
    room = terminal_width() - width - 6
    for name, tool in tools.items():
        summary = clip(tool.description.split("\n", 1)[0], room)
        host.renderer.write(f"  {name.ljust(width)}  {summary}")
    off = "off: commands run without asking, never outside the sandbox"
    mode = off if host.agent.approvals.mode == "off" else "manual"
    host.renderer.note(f"  approvals: {mode}")


def _yolo(host: CommandHost, arg: str) -> None:
    approvals = host.agent.approvals
    approvals.mode = "manual" if approvals.mode == "off" else "off"
    if approvals.mode == "off":
        host.renderer.note(
            "· yolo on: commands run without asking, inside the sandbox only (the hard floor "
            "still holds; running outside the sandbox is refused)",
            "yellow",
        )
    else:
        host.renderer.note("· yolo off: dangerous commands ask first")


def _stop(host: CommandHost, arg: str) -> None:
    if host.busy:
        host.interrupt("/stop")
    else:
        host.renderer.note("· nothing is running")


QUEUE_USAGE = "· usage: /queue [clear | run | drop N | edit N <text>]"


def _queue(host: CommandHost, arg: str) -> None:
    """The messages waiting in the agent's queue (kept with the session): list, clear, run
    now, drop or edit one by its number in the list."""
    action, _, rest = arg.strip().partition(" ")
    number, _, text = rest.strip().partition(" ")
    if action == "clear" and not rest:
        count = host.clear_queue()
        host.renderer.note(
            f"· took back {count} queued message(s)" if count else "· nothing is queued"
        )
    elif action == "run" and not rest:
        if host.queued_messages():
            host.run_queue()
        else:
            host.renderer.note("· nothing is queued")
    elif action == "drop" and number.isdigit() and not text:
        done = host.drop_queued(int(number))
        host.renderer.note(f"· dropped queued {number}" if done else f"· no queued {number}")
    elif action == "edit" and number.isdigit() and text.strip():
        done = host.edit_queued(int(number), text.strip())
        host.renderer.note(f"· edited queued {number}" if done else f"· no queued {number}")
    elif action:
        host.renderer.note(QUEUE_USAGE, "yellow")
    else:
        waiting = host.queued_messages()
        if not waiting:
            host.renderer.note("· nothing is queued (Enter while the agent works queues a message)")
        for position, queued in enumerate(waiting, 1):
            host.renderer.note(f"· queued {position}: {' '.join(queued.split())}")


def _steer(host: CommandHost, arg: str) -> None:
    text = arg.strip()
    if not text:
        host.renderer.note("· usage: /steer <text> (the running turn's next model call reads it)")
    elif host.steer(text):
        host.renderer.note(f"· steering: {' '.join(text.split())}")
    else:
        host.renderer.note("· no turn is running: sent as a message")
        host.submit(text)


def _drop_last_exchange(host: CommandHost, done: str, nothing: str) -> str | None:
    """Continue from before the last user message; that message's text, or None."""
    last = split_last_exchange(host.history())
    if last is None:
        host.renderer.note(f"· nothing to {nothing}")
        return None
    keep, text = last
    host.truncate(keep)
    host.renderer.note(f"· {done}: {text}")
    return text


def _retry(host: CommandHost, arg: str) -> None:
    text = _drop_last_exchange(host, "retrying", "retry")
    if text is not None:
        host.submit(text)


def _undo(host: CommandHost, arg: str) -> None:
    _drop_last_exchange(host, "undone", "undo")


_REWIND_WHAT = {"both": (True, True), "files": (True, False), "conversation": (False, True)}


REWIND_USAGE = "usage: /rewind <turn>[.<step>] [files|conversation|both]"


def _rewind(host: CommandHost, arg: str) -> None:
    """Without an argument, the turns with what changed in each (and their steps that could
    write); `/rewind N [what]` goes back to before turn N (files, conversation or both),
    `/rewind N.S` to before step S of turn N (files only)."""
    from talaria.checkpoints import CheckpointError

    words = arg.split()
    if not words:
        _list_turns(host)
        return
    turn, dot, step = words[0].partition(".")
    what = words[1] if len(words) > 1 else ("files" if dot else "both")
    if (
        not turn.isdigit()
        or (dot and not step.isdigit())
        or what not in _REWIND_WHAT
        or len(words) > 2
    ):
        host.renderer.error(REWIND_USAGE)
        return
    files, conversation = _REWIND_WHAT[what]
    try:
        report = host.agent.rewind(
            int(turn), files=files, conversation=conversation, step=int(step) if dot else None
        )
    except (KeyError, ValueError, CheckpointError) as exc:
        host.renderer.error(str(exc.args[0] if isinstance(exc, KeyError) else exc))
        return
    host.renderer.write(report.summary())


def _list_turns(host: CommandHost) -> None:
    turns = host.agent.checkpoints() if host.agent.session_id else []
    if not turns:
        host.renderer.note("· no turns to rewind to yet")
        return
    for turn in turns:
        dropped = " (rewound away)" if turn.dropped else ""
        host.renderer.write(f"  {turn.id:>3}. {turn.label}{dropped}")
        changed = ", ".join(turn.changed[:6]) + (" …" if len(turn.changed) > 6 else "")
        host.renderer.note(
            f"       {len(turn.changed)} file(s) changed{': ' if changed else ''}{changed}"
        )
        if turn.steps:
            steps = " · ".join(f"{turn.id}.{n} {tools}" for n, tools in enumerate(turn.steps, 1))
            host.renderer.note(f"       steps: {steps}")
    host.renderer.note("  /rewind <turn> [files|conversation|both] goes back to before it; "
                       "/rewind <turn>.<step>: the files before that step")  # fmt: skip


def _diff(host: CommandHost, arg: str) -> None:
    """What the agent changed in this session (`/diff N`: since turn N), a unified diff."""
    if arg and not arg.isdigit():
        host.renderer.error("usage: /diff [turn]")
        return
    try:
        diff = host.agent.diff(int(arg) if arg else None) if host.agent.session_id else ""
    except KeyError as exc:
        host.renderer.error(str(exc.args[0]))
        return
    if diff:
        host.renderer.write(diff.rstrip("\n"))
    else:
        host.renderer.note("· the agent changed no files")


def _reasoning(host: CommandHost, arg: str) -> None:
    shown = host.toggle_reasoning()
    host.renderer.note(f"· reasoning {'shown' if shown else 'hidden'}")


def _prompt(host: CommandHost, arg: str) -> None:
    from talaria.mcp.prompts import PromptError, prompt_listing, prompt_text

    source = host.agent.tool_source
    if source is None:
        host.renderer.note("· no MCP servers configured (talaria mcp add)")
        return
    if not arg:
        lines = prompt_listing(source.manager)
        host.renderer.write("\n".join(f"  /prompt {line}" for line in lines) or "  no prompts")
        return
    try:
        host.submit(prompt_text(source.manager, arg))
    except PromptError as exc:
        host.renderer.error(str(exc))


def _skills(host: CommandHost, arg: str) -> None:
    from talaria.cli.render import clip, terminal_width

    skills = host.agent.skills()
    if not skills:
        host.renderer.note("· no skills (folders with a SKILL.md in skills/ or .talaria/skills/)")
        return
    width = max(len(skill.name) for skill in skills) + 1
    for skill in skills:
        summary = clip(skill.description, terminal_width() - width - 6)
        host.renderer.write(f"  /{skill.name.ljust(width)} {summary}")
    host.renderer.note("  /<skill> [request] uses one; the model loads them by itself too")


def _quit(host: CommandHost, arg: str) -> None:
    host.quit()


def _clear(host: CommandHost, arg: str) -> None:
    host.clear_screen()
    host.switch_session(None)
    host.renderer.note("· screen cleared · new session (the old one stays: /resume)")


def _output(host: CommandHost, arg: str) -> None:
    """The full text of a tool's output (the chat shows only its first lines)."""
    outputs = host.renderer.tool_outputs
    if not outputs:
        host.renderer.note("· no tool output yet")
        return
    back = int(arg) if arg.isdigit() and int(arg) >= 1 else 1
    if back > len(outputs):
        host.renderer.note(f"· only {len(outputs)} tool output(s) so far")
        return
    shown = outputs[-back]
    host.renderer.note(f"· {shown.title}", "bold")
    host.renderer.write(shown.text or "(empty)")


def build_registry() -> SlashRegistry:
    registry = SlashRegistry()
    for command in (
        SlashCommand("help", "list the commands", _help, immediate=True),
        SlashCommand("new", "start a new session", _new),
        SlashCommand(
            "resume", "resume a past session", _resume, "[id|title]", completes_sessions=True
        ),
        SlashCommand("sessions", "list recent sessions", _sessions, immediate=True),
        SlashCommand("title", "show or set this session's title", _title, "[text]"),
        SlashCommand("model", "show or switch the model", _model, "[provider:model]"),
        SlashCommand("compress", "summarise the history now", _compress, "[focus]"),
        SlashCommand("usage", "tokens and cost of this session", _usage, immediate=True),
        SlashCommand("tools", "list the enabled tools", _tools),
        SlashCommand("yolo", "toggle asking before dangerous commands", _yolo, immediate=True),
        SlashCommand("stop", "interrupt the running turn", _stop, immediate=True),
        SlashCommand(
            "steer", "tell the running turn something now", _steer, "<text>", immediate=True
        ),
        SlashCommand(
            "queue",
            "the waiting messages: list, run, edit, drop",
            _queue,
            "[clear|run|drop|edit]",
            immediate=True,
        ),
        SlashCommand("retry", "send the last message again", _retry),
        SlashCommand("undo", "drop the last exchange", _undo),
        SlashCommand(
            "rewind", "back to before a turn (files|conversation|both)", _rewind, "[turn] [what]"
        ),
        SlashCommand("diff", "the agent's changes to the files, as a diff", _diff, "[turn]"),
        SlashCommand("reasoning", "show or hide the model's reasoning", _reasoning, immediate=True),
        SlashCommand(
            "output",
            "the full output of the last (or n-th last) tool",
            _output,
            "[n]",
            immediate=True,
        ),
        SlashCommand("clear", "clear the screen and start a new session", _clear),
        SlashCommand("prompt", "use an MCP server's prompt", _prompt, "[server:name k=v ...]"),
        SlashCommand("skills", "list the skills (/<skill> [request] uses one)", _skills),
        SlashCommand("quit", "leave (also Ctrl+D)", _quit, immediate=True),
        SlashCommand("exit", "leave (the same as /quit)", _quit, immediate=True),
    ):
        registry.add(command)
    return registry


@Condition
def typing_a_command() -> bool:
    """Complete (and make room for the menu) only while a slash command is being typed."""
    return get_app().current_buffer.text.startswith("/")


class SlashCompleter(Completer):
    """Completes slash command names, and session titles/ids after /resume."""

    def __init__(self, registry: SlashRegistry, titles: Callable[[], list[tuple[str, str]]]):
        self.registry = registry
        self.titles = titles

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterator[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or "\n" in text:
            return
        name, space, arg = text[1:].partition(" ")
        if not space:
            for command in self.registry.commands():
                if command.name.startswith(name):
                    yield Completion(
                        f"/{command.name}", start_position=-len(text), display_meta=command.summary
                    )
            return
        target = self.registry.get(name)
        if target is None or not target.completes_sessions:
            return
        needle = arg.lower()
        for title, session_id in self.titles():
            for candidate in (title, session_id):
                if candidate and candidate.lower().startswith(needle):
                    yield Completion(
                        candidate,
                        start_position=-len(arg),
                        display_meta=session_id if candidate == title else title,
                    )
                    break
