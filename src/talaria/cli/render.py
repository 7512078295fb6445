"""Terminal output for `talaria chat`: a pure client of engine events.

The renderer never drives the loop; it turns events into text printed above the prompt
(markdown blocks, tool lines, diffs, a usage footer) and keeps a one-line status (the spinner)
that the prompt shows while a turn runs. Rich is imported on first use, not at start-up, so the
prompt appears before the markdown machinery has loaded.
"""

from __future__ import annotations

import difflib
import io
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from talaria import events as ev
from talaria.cli.markdown_blocks import MarkdownBlocks
from talaria.cli.safe_text import clean, terminal_safe
from talaria.core import halt_reason
from talaria.interaction import subagent_name

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
MAX_DIFF_LINES = 40
OUTPUT_PREVIEW_LINES = 3
"""Lines of a tool's output shown under its line (all of it with /output)."""
KEPT_OUTPUTS = 50
MAX_WRITE_PREVIEW_BYTES = 1_000_000

_PREVIEW_KEYS: dict[str, tuple[str, ...]] = {
    "terminal": ("command",),
    "read_file": ("path",),
    "write_file": ("path",),
    "patch": ("path",),
    "search_files": ("pattern", "path"),
    "clarify": ("question",),
    "memory": ("action", "target"),
    "session_search": ("query",),
    "delegate_task": ("goal",),
}


def terminal_width() -> int:
    return max(40, shutil.get_terminal_size((80, 24)).columns)


def clip(text: str, width: int) -> str:
    """One line of at most `width` characters (newlines folded, indentation kept, an ellipsis
    when cut)."""
    line = text.rstrip().replace("\r", "").replace("\n", " ").expandtabs(4)
    return line if len(line) <= width else line[: max(0, width - 1)] + "…"


def tool_preview(name: str, arguments: dict[str, Any]) -> str:
    """The few words that say what a tool call does (its command, its path, ...)."""
    keys = _PREVIEW_KEYS.get(name)
    if keys:
        preview = " ".join(str(arguments[k]) for k in keys if arguments.get(k) not in (None, ""))
    elif name == "todo":
        todos = arguments.get("todos")
        preview = f"{len(todos)} item(s)" if isinstance(todos, list) else "read"
    else:
        preview = json.dumps(arguments, ensure_ascii=False, default=str) if arguments else ""
    return " ".join(clean(preview).split())


def format_tokens(count: int) -> str:
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k".replace(".0k", "k")
    return f"{count / 1_000_000:.1f}M".replace(".0M", "M")


def format_cost(cost: float | None) -> str:
    """The one way a cost is shown: "unknown" when no price is known, "$0.00" when free."""
    if cost is None:
        return "unknown"
    return f"${cost:.2f}" if cost >= 0.01 or cost == 0 else f"${cost:.4f}"


def usage_summary(usage: Mapping[str, Any]) -> str:
    """`1.2k in · 340 out · 80% cached · $0.0021` (tokens read, written, cache hits, cost)."""
    read = int(usage.get("cache_read_tokens") or 0)
    prompt = read + sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_write_tokens"))
    parts = [
        f"{format_tokens(prompt)} in",
        f"{format_tokens(int(usage.get('output_tokens') or 0))} out",
    ]
    if read:
        parts.append(f"{round(100 * read / prompt)}% cached")
    parts.append(f"cost {format_cost(usage.get('estimated_cost_usd'))}")
    return " · ".join(parts)


def usage_footer(usage: dict[str, Any], api_calls: int, seconds: float) -> str:
    """The one line after each turn: the usage summary, model calls and wall time."""
    calls = f"{api_calls} call{'s' if api_calls != 1 else ''}"
    return f"{usage_summary(usage)} · {calls} · {seconds:.1f}s"


def extract_diff(result: str) -> str | None:
    """The unified diff inside a patch tool's result, if it has one."""
    lines = result.splitlines()
    for index, line in enumerate(lines):
        if line.startswith(("--- ", "@@ ")):
            return "\n".join(lines[index:])
    return None


def file_diff(path: str, old: str | None, new: str) -> str:
    old_lines = [] if old is None else old.splitlines()
    diff = difflib.unified_diff(
        old_lines, new.splitlines(), fromfile=f"a/{path}", tofile=f"b/{path}", lineterm="", n=2
    )
    return "\n".join(diff)


_STYLES = {
    "bold": "1",
    "dim": "2",
    "italic": "3",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "cyan": "36",
}


class Painter:
    """Styles text with plain ANSI codes; only markdown goes through rich (loaded on first use,
    so the prompt does not wait for it)."""

    def __init__(self, color: bool) -> None:
        self.color = color and not os.environ.get("NO_COLOR")

    def style(self, text: str, style: str) -> str:
        """`text` in a space-separated style ("bold cyan", "dim red"); each line styled alone so
        the terminal can re-wrap it."""
        codes = ";".join(_STYLES[word] for word in style.split() if word in _STYLES)
        if not codes or not self.color:
            return text
        return "\n".join(
            f"\x1b[{codes}m{line}\x1b[0m" if line else line for line in text.split("\n")
        )

    def markdown(self, text: str) -> str:
        from rich.console import Console
        from rich.markdown import Markdown

        console = Console(
            file=io.StringIO(),
            width=terminal_width(),
            force_terminal=self.color,
            color_system="auto" if self.color else None,
            highlight=False,
            emoji=False,
            legacy_windows=False,
        )
        console.print(Markdown(text, code_theme="monokai", hyperlinks=False))
        out = console.file
        assert isinstance(out, io.StringIO)
        return tidy(out.getvalue())

    def diff(self, diff: str, indent: int = 4) -> str:
        lines = diff.splitlines()
        shown = lines[:MAX_DIFF_LINES]
        width = terminal_width() - indent
        out = [self.style(" " * indent + clip(line, width), _diff_style(line)) for line in shown]
        if len(lines) > len(shown):
            out.append(self.style(" " * indent + f"… {len(lines) - len(shown)} more lines", "dim"))
        return "\n".join(out) + "\n"


_SGR = re.compile(r"\x1b\[([0-9;]*)m")
_BACKGROUNDS = {str(n) for n in (*range(40, 49), *range(100, 108))}


def _blank(line: str) -> bool:
    """Nothing visible: only spaces, and no background colour painting them."""
    if any(param in _BACKGROUNDS for group in _SGR.findall(line) for param in group.split(";")):
        return False
    return not _SGR.sub("", line).strip()


def tidy(rendered: str) -> str:
    """Drop the blank lines around a rendered block and the padding after each line's text,
    so blocks stack evenly and a narrower terminal does not re-wrap empty space."""
    lines = [line.rstrip(" ") for line in rendered.split("\n")]
    while lines and _blank(lines[0]):
        lines.pop(0)
    while lines and _blank(lines[-1]):
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def _diff_style(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "bold dim"
    if line.startswith("@@"):
        return "cyan"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    return "dim"


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A finished tool's output, kept for /output."""

    title: str
    text: str


@dataclass
class _RunningTool:
    name: str
    preview: str
    old_content: str | None = None


@dataclass
class _TurnView:
    """What the status line shows and what the end of the turn still has to print."""

    state: str = "idle"
    detail: str = ""
    since: float = 0.0
    text_in_step: bool = False
    preparing: list[str] = field(default_factory=list)
    running: dict[str, _RunningTool] = field(default_factory=dict)


class Renderer:
    """The event sink of the interactive chat. Thread-safe: events arrive from worker threads."""

    def __init__(
        self,
        out: TextIO,
        *,
        color: bool,
        cwd: Path,
        show_reasoning: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out = out
        self.paint = Painter(color)
        self.cwd = cwd
        self.show_reasoning = show_reasoning
        self.clock = clock
        self.queued = 0
        self.tool_outputs: list[ToolOutput] = []
        self._lock = threading.RLock()
        self._md = MarkdownBlocks()
        self._reasoning = ""
        self._view = _TurnView()
        self._after_block = False
        self._handlers: dict[type, Callable[[Any], None]] = {
            ev.StatusChanged: self._on_status,
            ev.ThinkingStarted: self._on_thinking,
            ev.TextDelta: self._on_text,
            ev.ReasoningDelta: self._on_reasoning,
            ev.ToolCallGenerated: self._on_tool_generated,
            ev.ToolStarted: self._on_tool_started,
            ev.ToolFinished: self._on_tool_finished,
            ev.ClarifyRequested: lambda _e: self.flush(),
            ev.StepFinished: lambda _e: self.flush(),
            ev.Notice: self._on_notice,
            ev.TurnFinished: self._on_turn_finished,
            ev.SteerAccepted: self._on_steer_accepted,
            ev.SteerDelivered: self._on_steer_delivered,
            ev.QueuedMessageStarted: self._on_queued_started,
            ev.SubagentEvent: self._on_subagent,
        }
        self._steers: dict[str, str] = {}

    # ---- output helpers ---------------------------------------------------------------

    def note(self, message: str, style: str = "dim", *, wrap: bool = False) -> None:
        """One styled line (cut to the width), or whole lines the terminal wraps with `wrap`."""
        text = message if wrap else clip(message, terminal_width() - 1)
        self.write(self.paint.style(text, style))

    def error(self, message: str) -> None:
        self.note(f"✗ {' '.join(message.split())}", "red", wrap=True)

    def markdown(self, text: str) -> None:
        """A block of the answer; consecutive blocks get one blank line between them."""
        rendered = self.paint.markdown(text)
        if rendered:
            self.write(("\n" if self._after_block else "") + rendered)
            self._after_block = True

    def write(self, text: str) -> None:
        """The only way out to the terminal: control sequences other than colours are
        dropped here, whatever their source (model, tool, stored session, error text)."""
        text = terminal_safe(text)
        if text:
            self._after_block = False
            self.out.write(text if text.endswith("\n") else text + "\n")
            self.out.flush()

    def echo_user(self, text: str) -> None:
        lines = text.strip("\n").splitlines() or [""]
        body = self.paint.style("\n  ".join(lines), "bold")
        self.write("\n" + self.paint.style("› ", "bold cyan") + body)

    # ---- the turn ---------------------------------------------------------------------

    def begin_turn(self) -> None:
        with self._lock:
            self._md = MarkdownBlocks()
            self._reasoning = ""
            self._view = _TurnView(state="thinking", since=self.clock())

    def end_turn(self, result: Mapping[str, Any], seconds: float) -> None:
        with self._lock:
            self.flush()
            self._view = _TurnView()
            reason = str(result.get("turn_exit_reason", ""))
            if result.get("interrupted"):
                self.note("⏹ interrupted", "yellow")
            elif result.get("failed"):
                self.error(str(result.get("error") or reason))
            elif (why := halt_reason(reason)) is not None:
                self.note(f"⏹ stopped: {why}", "yellow")
            calls = int(result.get("api_calls") or 0)
            if calls:
                self.note(f"  {usage_footer(result.get('usage') or {}, calls, seconds)}", "dim")

    def abort_turn(self) -> None:
        """The turn ended without a result (it raised); leave the screen tidy."""
        with self._lock:
            self.flush()
            self._view = _TurnView()

    def flush(self) -> None:
        """Print whatever streamed text is still buffered."""
        with self._lock:
            self._flush_reasoning()
            rest = self._md.rest()
            if rest:
                self.markdown(rest)

    def status(self) -> str:
        """The spinner line for the prompt ('' when idle)."""
        with self._lock:
            view = self._view
            if view.state == "idle":
                return ""
            frame = SPINNER[int(self.clock() * 10) % len(SPINNER)]
            label = self._status_label(view)
            elapsed = f"{self.clock() - view.since:.0f}s"
            queued = f" · {self.queued} queued" if self.queued else ""
            return f"{frame} {label} {elapsed}{queued} · Ctrl+C to interrupt"

    def _status_label(self, view: _TurnView) -> str:
        width = terminal_width() - 40
        if view.running:
            tools = list(view.running.values())
            first = clip(f"{tools[0].name} {tools[0].preview}", width)
            return first + (f" (+{len(tools) - 1})" if len(tools) > 1 else "")
        if view.preparing:
            return clip(f"preparing {', '.join(view.preparing)}…", width)
        if view.state == "writing":
            partial = " ".join(self._md.partial_line.split())
            if len(partial) > width - 10:
                partial = "…" + partial[-(width - 11) :]
            return f"writing… {partial}".rstrip()
        labels = {
            "thinking": "thinking…",
            "reasoning": "reasoning…",
            "compressing": "compressing context…",
            "retrying": "retrying…",
        }
        label = labels.get(view.state, f"{view.state}…")
        return clip(f"{label} {view.detail}".strip(), width)

    def __call__(self, event: ev.Event) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            with self._lock:
                handler(event)

    # ---- event handlers (called with the lock held) -----------------------------------

    def _on_status(self, event: ev.StatusChanged) -> None:
        if event.status in ("compressing", "retrying", "fallback"):
            self._set_state(event.status, event.detail)

    def _set_state(self, state: str, detail: str = "") -> None:
        if self._view.state != state:
            self._view.since = self.clock()
        self._view.state, self._view.detail = state, detail

    def _on_thinking(self, event: ev.ThinkingStarted) -> None:
        self.flush()
        self._view.text_in_step = False
        self._view.preparing = []
        self._set_state("thinking")

    def _on_text(self, event: ev.TextDelta) -> None:
        self._flush_reasoning()
        self._view.text_in_step = True
        self._set_state("writing")
        for block in self._md.feed(clean(event.text)):
            self.markdown(block)

    def _on_reasoning(self, event: ev.ReasoningDelta) -> None:
        self._set_state("reasoning")
        if not self.show_reasoning:
            return
        self._reasoning += clean(event.text)
        if "\n" in self._reasoning:
            done, self._reasoning = self._reasoning.rsplit("\n", 1)
            self._print_reasoning(done)

    def _flush_reasoning(self) -> None:
        if self._reasoning.strip() and self.show_reasoning:
            self._print_reasoning(self._reasoning)
        self._reasoning = ""

    def _print_reasoning(self, text: str) -> None:
        lines = [line for line in text.splitlines() if line.strip()]
        if lines:
            self.write(self.paint.style("\n".join(f"┊ {line}" for line in lines), "dim italic"))

    def _on_tool_generated(self, event: ev.ToolCallGenerated) -> None:
        self.flush()
        self._view.preparing.append(event.name)
        self._set_state("preparing")

    def _on_tool_started(self, event: ev.ToolStarted) -> None:
        self.flush()
        if event.name in self._view.preparing:
            self._view.preparing.remove(event.name)
        tool = _RunningTool(event.name, tool_preview(event.name, event.arguments))
        if event.name == "write_file":
            tool.old_content = self._read_existing(event.arguments.get("path"))
        self._view.running[event.call_id] = tool
        self._set_state("running")

    def _read_existing(self, path: Any) -> str | None:
        """The file's content before write_file replaces it (for the diff)."""
        if not isinstance(path, str):
            return None
        target = Path(path) if Path(path).is_absolute() else self.cwd / path
        try:
            if target.stat().st_size > MAX_WRITE_PREVIEW_BYTES:
                return None
            return target.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def _on_tool_finished(self, event: ev.ToolFinished) -> None:
        tool = self._view.running.pop(event.call_id, None)
        preview = tool.preview if tool else ""
        mark, style = ("✗", "red") if event.is_error else ("✓", "green")
        self._tool_line(mark, style, event.name, preview, event.duration_s)
        self.tool_outputs = [
            *self.tool_outputs[-(KEPT_OUTPUTS - 1) :],
            ToolOutput(f"{event.name} {preview}".strip(), clean(event.result)),
        ]
        if event.is_error:
            first = next((line for line in clean(event.result).splitlines() if line.strip()), "")
            self.note(f"    └ {clip(first.strip(), terminal_width() - 8)}", "dim red")
        elif event.name == "patch":
            diff = extract_diff(event.result)
            if diff:
                self.write(self.paint.diff(diff))
        elif event.name == "write_file" and tool is not None:
            self._write_file_diff(tool)
        else:
            self._output_preview(event.result)
        if not self._view.running:
            self._set_state("thinking")

    def _output_preview(self, result: str) -> None:
        """The first lines of a tool's output under its line; /output shows all of it."""
        lines = [line for line in clean(result).splitlines() if line.strip()]
        if not lines:
            return
        width = terminal_width() - 8
        shown = [f"    │ {clip(line, width)}" for line in lines[:OUTPUT_PREVIEW_LINES]]
        if len(lines) > OUTPUT_PREVIEW_LINES:
            shown.append(f"    … {len(lines) - OUTPUT_PREVIEW_LINES} more lines (/output)")
        self.write(self.paint.style("\n".join(shown), "dim"))

    def _on_subagent(self, event: ev.SubagentEvent) -> None:
        """A sub-agent's tool calls, one dim line each under the delegate_task call."""
        inner, origin = event.event, event.origin
        if not isinstance(inner, ev.ToolFinished):
            return
        mark = "✗" if inner.is_error else "✓"
        line = f"{subagent_name(origin)}: {mark} {inner.name} {inner.duration_s:.1f}s"
        self.note(f"    ↳ {line}", "dim")

    def _tool_line(self, mark: str, style: str, name: str, preview: str, seconds: float) -> None:
        duration = f" {seconds:.1f}s"
        room = terminal_width() - len(name) - len(duration) - 6
        paint = self.paint
        line = paint.style(f"  {mark} ", style) + paint.style(name, "bold")
        if preview:
            line += " " + clip(preview, room)
        self.write(line + paint.style(duration, "dim"))

    def _write_file_diff(self, tool: _RunningTool) -> None:
        target = Path(tool.preview) if Path(tool.preview).is_absolute() else self.cwd / tool.preview
        try:
            new = target.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return
        if tool.old_content is None:
            self.note(f"    new file · {len(new.splitlines())} lines", "dim")
            return
        diff = file_diff(tool.preview, tool.old_content, new)
        if diff:
            self.write(self.paint.diff(diff))

    def _on_notice(self, event: ev.Notice) -> None:
        self.flush()
        styles = {"warning": "yellow", "error": "red"}
        self.note(f"· {event.message}", styles.get(event.level, "dim"))

    def _on_steer_accepted(self, event: ev.SteerAccepted) -> None:
        self._steers[event.steer_id] = event.text

    def _on_steer_delivered(self, event: ev.SteerDelivered) -> None:
        self.flush()
        for steer_id in event.steer_ids:
            text = " ".join(self._steers.pop(steer_id, "").split())
            self.note(f"· steer delivered to the model: {text}", "cyan")

    def _on_queued_started(self, event: ev.QueuedMessageStarted) -> None:
        """A message the engine queued (a steer that came too late) starts its turn."""
        self.flush()
        self.echo_user(event.text)
        self._view = _TurnView(state="thinking", since=self.clock())

    def _on_turn_finished(self, event: ev.TurnFinished) -> None:
        self.flush()
        if event.final_response and not self._view.text_in_step:
            self.markdown(clean(event.final_response))
        self._view.state = "finishing"
