"""`execute_code`: the model writes a short Python program that calls the agent's tools as
functions (`from talaria_tools import read_file, terminal`), and only what it prints comes
back, so a loop over twenty files costs one model call instead of twenty.

It must not be a way around the boundary:

- The program runs exactly where a terminal command runs: through `terminal.run_command`,
  inside the sandbox (`sandbox.confine`: same mode, writable roots, network, tracked
  processes, environment), and the call itself is judged by the approval policy as the
  terminal command `python3 -c <code>` (`policy.approval.python_command`).
- Each tool call the program makes goes back to the agent and runs as a call of its own
  (`ToolContext.call_tool`): the same `pre_tool_call` hooks, approval policy and events as a
  direct call, so the front end sees each one and a dangerous inner command is asked about
  like a direct one. `execute_code` itself cannot be called from inside.
- The channel is one end of a Unix socket pair the program inherits (descriptor passed to
  `python3 -I -c`). A socket file would need `socket(AF_UNIX)`, which the sandbox's
  network-off filter denies (`sandbox_seccomp`); an inherited pair reaches only talaria.

Limits: `timeout` seconds (default 120, at most 600), `MAX_CALLS` tool calls, and the printed
output kept as a terminal command's is (head and tail), then cut at `MAX_OUTPUT` characters.
The iteration budget counts the one `execute_code` call.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import socket
import sys
from typing import Any

from talaria.tools.base import Tool, ToolCaller, ToolContext, ToolError

NAME = "execute_code"
MAX_CALLS = 100
MAX_OUTPUT = 20_000
DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 600.0
MAX_MESSAGE = 16 * 1024 * 1024

BOOTSTRAP = r"""
import json, socket, sys, types
channel = socket.socket(fileno=int(sys.argv[1]))
stream = channel.makefile("rwb")
hello = json.loads(stream.readline())
module = types.ModuleType("talaria_tools")
module.__doc__ = "The agent's tools, as functions that return their result as text."

class ToolCallError(Exception):
    "A tool call failed or was refused; the message says why."

def _make(name, params):
    def call(*args, **kwargs):
        if len(args) > len(params):
            raise TypeError(f"{name}() takes at most {len(params)} positional arguments")
        kwargs.update(zip(params, args))
        stream.write(json.dumps({"tool": name, "arguments": kwargs}).encode() + b"\n")
        stream.flush()
        line = stream.readline()
        if not line:
            raise SystemExit("the agent closed the channel")
        answer = json.loads(line)
        if answer["error"]:
            raise ToolCallError(answer["content"])
        return answer["content"]
    call.__name__ = name
    return call

for _name, _params in hello["tools"].items():
    setattr(module, _name, _make(_name, _params))
module.ToolCallError = ToolCallError
sys.modules["talaria_tools"] = module
code = compile(hello.pop("code"), "<execute_code>", "exec")
exec(code, {"__name__": "__main__"})
"""


async def execute_code(code: str, ctx: ToolContext, timeout: float | None = None) -> str:
    """Run a Python program that calls your tools as functions; only what it prints comes back.

    Args:
        code: The program. Import tools with `from talaria_tools import read_file, terminal`
            (every tool you have, except execute_code); each returns its result as text and
            raises talaria_tools.ToolCallError when it fails or is refused. Arguments by name
            or in the tool's order: read_file("notes.txt") or read_file(path="notes.txt").
        timeout: Seconds the program may run (default 120, at most 600).
    """
    from talaria.tools.builtin.terminal import format_result, run_command
    from talaria.tools.sandbox import confine

    if not code.strip():
        raise ToolError("code is empty: write the Python program to run")
    caller = ctx.call_tool
    if caller is None:
        raise ToolError("execute_code runs only inside an agent's turn")
    limit = min(float(timeout or DEFAULT_TIMEOUT), MAX_TIMEOUT)
    if limit <= 0:
        raise ToolError("timeout must be a positive number of seconds")
    prefix = confine(ctx.sandbox, ctx.cwd, ctx.emit)
    ours, theirs = socket.socketpair()
    calls = [0]
    try:
        reader, writer = await asyncio.open_unix_connection(sock=ours, limit=MAX_MESSAGE)
        hello = {"code": code, "tools": _signatures(caller)}
        writer.write(json.dumps(hello).encode() + b"\n")
        serving = asyncio.ensure_future(_serve(reader, writer, caller, calls))
        command = f"exec {shlex.quote(sys.executable)} -I -c {shlex.quote(BOOTSTRAP)} "
        command += str(theirs.fileno())
        try:
            result = await asyncio.to_thread(
                run_command, command, str(ctx.cwd), limit, ctx.interrupt, prefix,
                ctx.session_id, (theirs.fileno(),),
            )  # fmt: skip
        finally:
            serving.cancel()
            writer.close()
    finally:
        theirs.close()
        ours.close()
    text = format_result(result, limit)
    if len(text) > MAX_OUTPUT:
        text = text[: MAX_OUTPUT // 2] + "\n[... output cut ...]\n" + text[-MAX_OUTPUT // 2 :]
    made = calls[0]
    return f"[{made} tool call{'s' if made != 1 else ''}]\n{text}"


def _signatures(caller: ToolCaller) -> dict[str, list[str]]:
    """Each callable tool's parameter names, in its schema's order."""
    return {
        name: list(tool.parameters.get("properties", {}))
        for name, tool in caller.tools.items()
        if name != NAME and name.isidentifier()
    }


async def _serve(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    caller: ToolCaller,
    calls: list[int],
) -> None:
    """Answer the program's tool calls, one at a time, until it ends (or breaks the channel:
    a line over `MAX_MESSAGE`, a write after it died)."""
    try:
        await _answer(reader, writer, caller, calls)
    except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        writer.close()


async def _answer(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    caller: ToolCaller,
    calls: list[int],
) -> None:
    while line := await reader.readline():
        try:
            request = json.loads(line)
            name, arguments = str(request["tool"]), request["arguments"]
            if not isinstance(arguments, dict):
                raise ValueError("arguments must be an object")
        except (ValueError, KeyError, TypeError) as exc:
            answer: dict[str, Any] = {"content": f"a malformed call: {exc}", "error": True}
        else:
            answer = await _one(name, arguments, caller, calls)
        writer.write(json.dumps(answer).encode() + b"\n")
        await writer.drain()


async def _one(
    name: str, arguments: dict[str, Any], caller: ToolCaller, calls: list[int]
) -> dict[str, Any]:
    if name == NAME:
        return {"content": "execute_code cannot be called from execute_code", "error": True}
    if calls[0] >= MAX_CALLS:
        return {"content": f"the program made more than {MAX_CALLS} tool calls", "error": True}
    calls[0] += 1
    try:
        content, is_error = await caller(name, arguments)
    except ToolError as exc:
        return {"content": str(exc), "error": True}
    return {"content": content, "error": is_error}


CODE_TOOL = Tool(
    name=NAME,
    description=(
        "Run a short Python program that calls your tools as functions and prints what you "
        "need: use it to loop over many files or calls and get back only the summary. "
        "`from talaria_tools import read_file, terminal` (any of your tools); each returns "
        "its result as text or raises talaria_tools.ToolCallError. Each tool call is checked "
        "and approved like a direct one. The program runs in the sandbox like a terminal "
        f"command. At most {MAX_CALLS} tool calls; output over {MAX_OUTPUT:,} characters is cut."
    ),
    parameters={
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "The Python program to run."},
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": MAX_TIMEOUT,
                "description": f"Seconds it may run (default {DEFAULT_TIMEOUT:g}).",
            },
        },
        "required": ["code"],
        "additionalProperties": False,
    },
    handler=execute_code,
    toolset="code",
    context_param="ctx",
    timeout=MAX_TIMEOUT + 30,
)
