"""talaria's file and terminal tools, done by the editor when it offers to.

With `fs/read_text_file` the agent reads what the user sees, unsaved edits included; with
`fs/write_text_file` its writes land in the editor's buffers; with `terminal/*` its commands run
in the editor's terminal, so the user watches them. The tools keep the built-ins' names and
schemas, so the approval policy (which judges `write_file`, `patch` and `terminal` calls by
name) and the model's prompt are the same either way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from acp import RequestError, helpers
from acp.schema import ClientCapabilities

from talaria.acp.updates import CallNotes, Edit
from talaria.offload import run_user_code
from talaria.policy.sensitive_paths import resolve_path
from talaria.tools.base import Tool, ToolContext, ToolError
from talaria.tools.builtin import files, terminal
from talaria.tools.builtin.processes import PROCESS_TOOL
from talaria.tools.sandbox import confine, failure_hint

OUTPUT_LIMIT = terminal.KEEP_HEAD + terminal.KEEP_TAIL
EXIT_POLL = 0.05


@dataclass
class EditorSide:
    """The client connection as the tools use it, for one ACP session."""

    conn: Any
    session_id: str
    notes: CallNotes
    push: Callable[[Any], None]
    """Queue a session update behind the ones already queued (updates stay in order)."""

    async def read(self, target: Path) -> str:
        try:
            response = await self.conn.read_text_file(session_id=self.session_id, path=str(target))
        except RequestError as exc:
            raise ToolError(f"the editor could not read {target}: {_reason(exc)}") from None
        return str(response.content)

    async def read_if_any(self, target: Path) -> str | None:
        try:
            return await self.read(target)
        except ToolError:
            return None

    async def write(self, target: Path, content: str) -> None:
        try:
            await self.conn.write_text_file(
                session_id=self.session_id, path=str(target), content=content
            )
        except RequestError as exc:
            raise ToolError(f"the editor could not write {target}: {_reason(exc)}") from None


def _reason(exc: RequestError) -> str:
    data = exc.data
    detail = data.get("details") or data.get("message") if isinstance(data, dict) else None
    return f"{exc}: {detail}" if detail else str(exc)


def editor_tools(side: EditorSide, caps: ClientCapabilities | None) -> tuple[list[Tool], set[str]]:
    """The replacement tools this client supports, and the built-in toolsets they replace."""
    fs = caps.fs if caps is not None else None
    reads = bool(fs and fs.read_text_file)
    writes = bool(fs and fs.write_text_file)
    tools: list[Tool] = []
    replaced: set[str] = set()
    if reads or writes:
        replaced.add("file")
        tools += [
            _bind(files.READ_FILE_TOOL, side, _read_file) if reads else files.READ_FILE_TOOL,
            _bind(files.WRITE_FILE_TOOL, side, _write_file) if writes else files.WRITE_FILE_TOOL,
            _bind(files.PATCH_TOOL, side, _patch) if reads and writes else files.PATCH_TOOL,
            files.SEARCH_FILES_TOOL,
        ]
    if caps is not None and caps.terminal:
        replaced.add("terminal")
        tools += [_bind(terminal.TERMINAL_TOOL, side, _terminal), PROCESS_TOOL]
    return tools, replaced


def recorded_edits(tools: list[Tool]) -> frozenset[str]:
    """The edit tools among `tools` that report their own diffs (they write via the editor)."""
    return frozenset(t.name for t in tools if t.name in ("write_file", "patch") and t.is_async)


def _bind(builtin: Tool, side: EditorSide, handler: Callable[..., Any]) -> Tool:
    async def run(**kwargs: Any) -> Any:
        return await handler(side, **kwargs)

    run.__name__ = builtin.name
    return replace(builtin, handler=run, check=None)


async def _read_file(
    side: EditorSide,
    path: str,
    ctx: ToolContext,
    offset: int = 1,
    limit: int = files.DEFAULT_LIMIT,
) -> str:
    offset = files.check_window(offset, limit)
    target = resolve_path(path, ctx.cwd)
    text = await side.read(target)
    return files.number_lines(text.splitlines(), str(target), offset, limit)


async def _write_file(side: EditorSide, path: str, content: str, ctx: ToolContext) -> str:
    target = resolve_path(path, ctx.cwd)
    if target.is_dir():
        raise ToolError(f"{target} is a directory")
    old = await side.read_if_any(target)
    await side.write(target, content)
    side.notes.edits[ctx.call_id] = Edit(str(target), old, content)
    return files.write_report(target, content, existed=old is not None)


async def _patch(
    side: EditorSide,
    path: str,
    old_string: str,
    new_string: str,
    ctx: ToolContext,
    replace_all: bool = False,
) -> str:
    files.check_patch_strings(old_string, new_string)
    target = resolve_path(path, ctx.cwd)
    text = await side.read(target)
    updated, count = files.replace_text(text, old_string, new_string, replace_all, target)
    await side.write(target, updated)
    side.notes.edits[ctx.call_id] = Edit(str(target), text, updated)
    return files.patch_report(target, count, text, updated, ctx.cwd)


async def _terminal(
    side: EditorSide,
    command: str,
    ctx: ToolContext,
    timeout: float | None = None,
    background: bool = False,
    escalate: bool = False,
    justification: str | None = None,
) -> str:
    """The command in an editor terminal, inside talaria's sandbox exactly as the built-in
    runs it (unless the call was approved to run outside); background processes stay
    talaria's own (the `process` tool manages them)."""
    if background or not command.strip():
        return await run_user_code(
            terminal.terminal, command, ctx, timeout, background, escalate, justification
        )
    limit = terminal.command_timeout(timeout)
    prefix = [] if escalate else confine(ctx.sandbox, ctx.cwd, ctx.emit)
    argv = [*prefix, "bash", "-c", command]
    conn, session_id = side.conn, side.session_id
    created = await conn.create_terminal(
        session_id=session_id,
        command=argv[0],
        args=argv[1:],
        cwd=str(ctx.cwd),
        output_byte_limit=OUTPUT_LIMIT,
    )
    terminal_id = created.terminal_id
    side.notes.terminals[ctx.call_id] = terminal_id
    side.push(
        helpers.update_tool_call(ctx.call_id, content=[helpers.tool_terminal_ref(terminal_id)])
    )
    try:
        stopped, status = await _wait_for_exit(side, terminal_id, limit, ctx)
        if stopped is not None:
            await conn.kill_terminal(session_id=session_id, terminal_id=terminal_id)
        output = await conn.terminal_output(session_id=session_id, terminal_id=terminal_id)
    finally:
        with contextlib.suppress(Exception):
            await conn.release_terminal(session_id=session_id, terminal_id=terminal_id)
    exit_status = status or output.exit_status
    text = output.output
    if output.truncated:
        text = f"[earlier output cut; the last {OUTPUT_LIMIT} bytes follow]\n{text}"
    code = exit_status.exit_code if exit_status is not None else None
    result = terminal.format_result(terminal.RunResult(code, text, stopped), limit)
    sandbox = ctx.sandbox
    hint = failure_hint(sandbox, ctx.cwd, text, code) if prefix and sandbox is not None else ""
    return f"{result}\n{hint}" if hint else result


async def _wait_for_exit(
    side: EditorSide, terminal_id: str, limit: float, ctx: ToolContext
) -> tuple[str | None, Any]:
    """(None, exit status) when the command ended by itself, else ("timeout" | "interrupt",
    None) once it must be stopped."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    waiter = asyncio.ensure_future(
        side.conn.wait_for_terminal_exit(session_id=side.session_id, terminal_id=terminal_id)
    )
    try:
        while not waiter.done():
            if ctx.interrupt.is_set():
                return "interrupt", None
            if loop.time() >= deadline:
                return "timeout", None
            await asyncio.wait({waiter}, timeout=EXIT_POLL)
        return None, waiter.result()
    finally:
        if not waiter.done():
            waiter.cancel()
