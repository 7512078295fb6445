"""Engine events, and stored histories, as ACP session updates: what the editor shows.

Streamed text and reasoning become message and thought chunks; each tool call becomes a
`tool_call` (kind, title, locations) and then a `tool_call_update` with its status and content:
a diff for file edits, the client's terminal for commands run there, the result text otherwise;
the `todo` list also becomes a `plan`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from acp import helpers
from acp.schema import (
    AgentPlanUpdate,
    ContentToolCallContent,
    FileEditToolCallContent,
    PlanEntry,
    TerminalToolCallContent,
    ToolCallLocation,
    ToolCallStart,
    ToolCallStatus,
)

from talaria import events as ev
from talaria.acp.describe import EDIT_TOOLS, describe_call
from talaria.interaction import subagent_name
from talaria.loop.steering import UserNote, joined
from talaria.policy.sensitive_paths import resolve_path

SHOWN_RESULT_CHARS = 20_000
SNAPSHOT_BYTES = 2_000_000
"""Files larger than this are not diffed (the editor would not show such a diff usefully)."""
PLAN_STATUSES = ("pending", "in_progress", "completed")
FAILED_PREFIXES = ("Error:", "Denied", "BLOCKED", "Blocked by a hook", "Interrupted", "Not run")
"""How a stored tool result says it failed (the store keeps no error flag)."""

Update = Any
ToolContent = ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent


@dataclass(frozen=True, slots=True)
class Edit:
    path: str
    old: str | None
    new: str


@dataclass
class CallNotes:
    """What editor-side tools learned while running a call: the edit they made through the
    client (so the diff is of the editor's buffer) and the client terminal they ran in."""

    edits: dict[str, Edit] = field(default_factory=dict)
    terminals: dict[str, str] = field(default_factory=dict)


def tool_call_start(call_id: str, name: str, arguments: dict[str, Any], cwd: Path) -> ToolCallStart:
    view = describe_call(name, arguments, cwd)
    return helpers.start_tool_call(
        call_id,
        view.title,
        kind=view.kind,  # type: ignore[arg-type]
        status="in_progress",
        locations=[ToolCallLocation(path=place.path, line=place.line) for place in view.places],
        raw_input=arguments,
    )


def text_content(text: str) -> ContentToolCallContent:
    if len(text) > SHOWN_RESULT_CHARS:
        text = text[:SHOWN_RESULT_CHARS] + f"\n... [{len(text) - SHOWN_RESULT_CHARS} chars]"
    return helpers.tool_content(helpers.text_block(text))


def plan_update(result: str) -> AgentPlanUpdate | None:
    """The todo tool's result as the editor's plan (cancelled items leave the plan)."""
    try:
        todos = json.loads(result).get("todos")
    except (ValueError, AttributeError):
        return None
    if not isinstance(todos, list):
        return None
    entries = [
        PlanEntry(content=str(item.get("content", "")), priority="medium", status=item["status"])
        for item in todos
        if isinstance(item, dict) and item.get("status") in PLAN_STATUSES
    ]
    return helpers.update_plan(entries)


def subagent_call(origin: ev.SubagentOrigin | None, call_id: str) -> tuple[str, str]:
    """(the editor's id for a call, the prefix of its title): a sub-agent's calls are
    nested under the parent's delegate_task call and say which sub-agent made them."""
    if origin is None:
        return call_id, ""
    return f"{origin.parent_call_id}/{call_id}", f"{subagent_name(origin)}: "


class EventTranslator:
    """Turns the engine events of one session into updates, remembering each running call.

    `recorded` names the tools that report their own edits in `notes` (those that write
    through the client); for the others the file is read before and after the call."""

    def __init__(self, cwd: Path, notes: CallNotes, recorded: frozenset[str] = frozenset()):
        self._cwd = cwd
        self._notes = notes
        self._recorded = recorded
        self._running: dict[str, tuple[str, dict[str, Any]]] = {}
        self._before: dict[str, tuple[str, str | None]] = {}
        self._steers: dict[str, UserNote] = {}

    def translate(self, event: ev.Event) -> list[Update]:
        handler = _HANDLERS.get(type(event))
        return handler(self, event) if handler is not None else []

    def _text(self, event: ev.TextDelta) -> list[Update]:
        return [helpers.update_agent_message_text(event.text)]

    def _reasoning(self, event: ev.ReasoningDelta) -> list[Update]:
        return [helpers.update_agent_thought_text(event.text)]

    def _notice(self, event: ev.Notice) -> list[Update]:
        return [helpers.update_agent_thought_text(f"\n[{event.level}] {event.message}\n")]

    def _steer_accepted(self, event: ev.SteerAccepted) -> list[Update]:
        self._steers[event.steer_id] = UserNote(event.steer_id, event.text, from_steer=True)
        return []

    def _steer_delivered(self, event: ev.SteerDelivered) -> list[Update]:
        """The steers as the user note the model reads now (as a replay shows it later)."""
        notes = [self._steers.pop(i) for i in event.steer_ids if i in self._steers]
        return [helpers.update_user_message_text(joined(notes))] if notes else []

    def _queued_started(self, event: ev.QueuedMessageStarted) -> list[Update]:
        return [helpers.update_user_message_text(event.text)]

    def _started(self, event: ev.ToolStarted) -> list[Update]:
        if event.call_id in self._running:
            return []
        self._running[event.call_id] = (event.name, event.arguments)
        if event.name in EDIT_TOOLS and event.name not in self._recorded:
            path = event.arguments.get("path")
            if isinstance(path, str) and path:
                target = str(resolve_path(path, self._cwd))
                self._before[event.call_id] = (target, _snapshot(target))
        return [tool_call_start(event.call_id, event.name, event.arguments, self._cwd)]

    def _subagent(self, event: ev.SubagentEvent) -> list[Update]:
        """A sub-agent's tool calls as calls of their own, named after it."""
        inner = event.event
        if not isinstance(inner, ev.ToolStarted | ev.ToolFinished):
            return []
        call_id, prefix = subagent_call(event.origin, inner.call_id)
        if isinstance(inner, ev.ToolFinished):
            return self._finished(replace(inner, call_id=call_id))
        return [
            update.model_copy(update={"title": prefix + update.title})
            if isinstance(update, ToolCallStart)
            else update
            for update in self._started(replace(inner, call_id=call_id))
        ]

    def _finished(self, event: ev.ToolFinished) -> list[Update]:
        name, arguments = self._running.pop(event.call_id, (event.name, {}))
        before = self._before.pop(event.call_id, None)
        edit = self._notes.edits.pop(event.call_id, None)
        terminal = self._notes.terminals.pop(event.call_id, None)
        content: list[ToolContent] = []
        if not event.is_error and name in EDIT_TOOLS:
            edit = edit or _disk_edit(name, arguments, before)
            if edit is not None:
                content.append(helpers.tool_diff_content(edit.path, edit.new, edit.old))
        if terminal is not None:
            content.append(helpers.tool_terminal_ref(terminal))
        if not content or terminal is not None:
            content.append(text_content(event.result))  # also for clients that drop terminals
        status: ToolCallStatus = "failed" if event.is_error else "completed"
        updates: list[Update] = [
            helpers.update_tool_call(event.call_id, status=status, content=content)
        ]
        if name == "todo" and not event.is_error:
            plan = plan_update(event.result)
            if plan is not None:
                updates.append(plan)
        return updates


_HANDLERS: dict[type, Callable[[EventTranslator, Any], list[Update]]] = {
    ev.TextDelta: EventTranslator._text,
    ev.ReasoningDelta: EventTranslator._reasoning,
    ev.Notice: EventTranslator._notice,
    ev.ToolStarted: EventTranslator._started,
    ev.ToolFinished: EventTranslator._finished,
    ev.SteerAccepted: EventTranslator._steer_accepted,
    ev.SteerDelivered: EventTranslator._steer_delivered,
    ev.QueuedMessageStarted: EventTranslator._queued_started,
    ev.SubagentEvent: EventTranslator._subagent,
}


def _snapshot(path: str) -> str | None:
    """The file's text now, or None when there is none to diff against."""
    target = Path(path)
    try:
        if not target.is_file() or target.stat().st_size > SNAPSHOT_BYTES:
            return None
        return target.read_text("utf-8", errors="replace")
    except OSError:
        return None


def _disk_edit(
    name: str, arguments: dict[str, Any], before: tuple[str, str | None] | None
) -> Edit | None:
    if before is None:
        return None
    path, old = before
    new = arguments.get("content") if name == "write_file" else _snapshot(path)
    return Edit(path, old, new) if isinstance(new, str) else None


# ---- a stored conversation, replayed for session/load ----------------------------------------


def history_updates(messages: Iterable[Mapping[str, Any]], cwd: Path) -> list[Update]:
    """The stored conversation as the editor would have seen it live."""
    updates: list[Update] = []
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for message in messages:
        role = message.get("role")
        if role == "user":
            updates.extend(helpers.update_user_message(block) for block in _blocks(message))
        elif role == "assistant":
            updates.extend(_assistant_updates(message, cwd, calls))
        elif role == "tool":
            updates.extend(_result_updates(message, calls, cwd))
    return updates


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [helpers.text_block(content)] if content else []
    blocks: list[Any] = []
    for part in content if isinstance(content, list) else []:
        if part.get("type") == "text":
            blocks.append(helpers.text_block(str(part.get("text", ""))))
        elif part.get("type") == "image_url":
            blocks.extend(_image_block(part))
    return blocks


def _image_block(part: dict[str, Any]) -> list[Any]:
    ref = part.get("image_url")
    url = str(ref.get("url", "")) if isinstance(ref, dict) else str(ref or "")
    head, _, data = url.partition(",")
    if not url.startswith("data:") or ";base64" not in head:
        return [helpers.text_block(f"[image {url}]")]
    return [helpers.image_block(data, head[len("data:") :].split(";")[0])]


def _assistant_updates(
    message: Mapping[str, Any], cwd: Path, calls: dict[str, tuple[str, dict[str, Any]]]
) -> list[Update]:
    updates: list[Update] = []
    if isinstance(message.get("reasoning"), str) and message["reasoning"]:
        updates.append(helpers.update_agent_thought_text(message["reasoning"]))
    content = message.get("content")
    if isinstance(content, str) and content:
        updates.append(helpers.update_agent_message_text(content))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        name = str(function.get("name", ""))
        arguments = _arguments(function.get("arguments"))
        calls[str(call.get("id"))] = (name, arguments)
        updates.append(tool_call_start(str(call.get("id")), name, arguments, cwd))
    return updates


def _result_updates(
    message: Mapping[str, Any], calls: dict[str, tuple[str, dict[str, Any]]], cwd: Path
) -> list[Update]:
    call_id = str(message.get("tool_call_id"))
    name, arguments = calls.pop(call_id, ("", {}))
    result = message.get("content")
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
    failed = text.startswith(FAILED_PREFIXES)
    content: list[ToolContent] = []
    if not failed and name in EDIT_TOOLS and isinstance(arguments.get("path"), str):
        old = arguments.get("old_string") if name == "patch" else None
        new = arguments.get("new_string" if name == "patch" else "content")
        if isinstance(new, str):
            path = str(resolve_path(arguments["path"], cwd))
            content.append(helpers.tool_diff_content(path, new, old))
    updates: list[Update] = [
        helpers.update_tool_call(
            call_id,
            status="failed" if failed else "completed",
            content=content or [text_content(text)],
        )
    ]
    plan = plan_update(text) if name == "todo" and not failed else None
    return [*updates, plan] if plan is not None else updates


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
