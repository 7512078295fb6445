"""Runs the tool calls of one model response, as the lifecycle in docs/architecture.md describes.

One call runs inline; several run in parallel (at most `max_workers` at once); interactive tools
run alone as barriers. Sync handlers run on the process's shared user lane (`talaria.offload`),
so an agent holds no thread of its own. For each call: resolve -> parse and validate arguments
(the schema, then the tool's `precheck`) -> `pre_tool_call` guards -> approval -> handler ->
result transforms and caps -> `post_tool_call`. Arguments are checked before anyone is asked
to approve, so a user never approves a call that then fails on its arguments.

Every failure becomes a tool result the model can read ("Error: ..."), and results come back in
call order whatever order they finish. That includes what a handler raises that is not an
`Exception` (`SystemExit` from `sys.exit` or an argument parser, `KeyboardInterrupt`): it fails
the call, never the turn or the process. The text names the tool and the failure in words,
never a Python class name, traceback or module path (see docs/tools.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from talaria.core import ToolApprover, ToolCall, ToolMessage
from talaria.core.telemetry import NO_TELEMETRY, Scope, Telemetry
from talaria.events import EventSink, ToolFinished, ToolStarted
from talaria.interaction import Interactions
from talaria.interrupt import Interrupted, InterruptSignal
from talaria.messages.redact import redact
from talaria.offload import AbortedByUserCode, run_user_code
from talaria.plugins.hooks import HookBus
from talaria.policy.approval import (
    ESCALATED,
    SANDBOXED,
    UNCONFINED,
    ApprovalState,
    Assessment,
    Boundary,
    Denial,
    assess_tool_call,
)
from talaria.tools.approvals import CallApprover
from talaria.tools.base import Tool, ToolContext, ToolError
from talaria.tools.results import STREAM_ITEMS, cap_result, serialise_result
from talaria.tools.validate import ArgumentError, validate_arguments
from talaria.tools.write_boundary import assess_write_call, writes_files

log = logging.getLogger("talaria.tools")

RUNS_CODE = frozenset({"terminal", "execute_code"})
"""Tools whose calls run a program the model wrote, inside the sandbox when there is one."""

INTERRUPTED_RESULT = "Interrupted: the user stopped this turn before this tool call finished."


@dataclass(slots=True)
class CallOutcome:
    """What one tool call gives the model."""

    content: str
    is_error: bool = False
    halt: str | None = None
    """Set when the whole turn must stop (an approval timed out)."""
    waited: float = 0.0
    """Seconds spent waiting for the user's approval: not part of the tool's duration."""


@dataclass(slots=True)
class BatchResult:
    """The tool messages of one response's calls, in call order."""

    messages: list[ToolMessage]
    halt: str | None = None


@dataclass
class ExecutorSettings:
    """Limits on running tools (from the agent.* and approvals.* settings)."""

    max_workers: int = 8
    """How many calls of one response run at once."""
    default_timeout: float = 600.0
    approval_timeout: float = 300.0
    result_limit: int = 50_000
    spill_dir: Path | None = None
    interrupt_grace: float = 2.0


@dataclass
class ToolExecutor:
    """Runs the tool calls of a model response: guards, approvals, timeouts."""

    tools: Mapping[str, Tool]
    hooks: HookBus
    approvals: ApprovalState
    interactions: Interactions
    settings: ExecutorSettings = field(default_factory=ExecutorSettings)
    telemetry: Telemetry = NO_TELEMETRY

    async def run_batch(
        self,
        calls: list[ToolCall],
        make_context: Callable[[ToolCall, threading.Event], ToolContext[Any]],
        interrupt: InterruptSignal,
        emit: EventSink,
    ) -> BatchResult:
        outcomes: list[CallOutcome | None] = [None] * len(calls)
        for group in self._groups(calls):
            if interrupt.is_set:
                break
            results = await self._run_group(
                [calls[i] for i in group], make_context, interrupt, emit
            )
            for index, outcome in zip(group, results, strict=True):
                outcomes[index] = outcome
            if any(o.halt for o in results):
                break
        halt = next((o.halt for o in outcomes if o is not None and o.halt), None)
        messages: list[ToolMessage] = []
        for call, maybe in zip(calls, outcomes, strict=True):
            outcome = maybe or CallOutcome(
                INTERRUPTED_RESULT if interrupt.is_set else f"Not run: the turn stopped ({halt}).",
                True,
            )
            messages.append({"role": "tool", "tool_call_id": call.id, "content": outcome.content})
        return BatchResult(messages, halt)

    def _groups(self, calls: list[ToolCall]) -> list[list[int]]:
        """Consecutive non-interactive calls share a group; each interactive call is alone."""
        groups: list[list[int]] = []
        for index, call in enumerate(calls):
            tool = self.tools.get(call.name)
            if tool is not None and tool.interactive:
                groups.append([index])
            elif groups and not _is_barrier(self.tools, calls[groups[-1][-1]]):
                groups[-1].append(index)
            else:
                groups.append([index])
        return groups

    async def _run_group(
        self,
        calls: list[ToolCall],
        make_context: Callable[[ToolCall, threading.Event], ToolContext[Any]],
        interrupt: InterruptSignal,
        emit: EventSink,
    ) -> list[CallOutcome]:
        cancels = [threading.Event() for _ in calls]
        slots = asyncio.Semaphore(max(1, self.settings.max_workers))
        begun: set[str] = set()

        async def bounded(call: ToolCall, ctx: ToolContext[Any]) -> CallOutcome:
            async with slots:
                begun.add(call.id)
                return await self._run_one(call, ctx, emit)

        tasks = [
            asyncio.ensure_future(bounded(call, make_context(call, cancel)))
            for call, cancel in zip(calls, cancels, strict=True)
        ]
        together = tasks[0] if len(tasks) == 1 else asyncio.gather(*tasks)  # one: no gather
        together.add_done_callback(_retrieve)  # an interrupted gather's error is not news
        try:
            await interrupt.race(asyncio.shield(together))
            return [task.result() for task in tasks]
        except Interrupted:
            self.interactions.withdraw_all("interrupted")  # clear every prompt at once
            for cancel in cancels:
                cancel.set()
            done, _ = await asyncio.wait(tasks, timeout=self.settings.interrupt_grace)
            for call, task in zip(calls, tasks, strict=True):
                if task not in done:
                    task.cancel()  # every started call still ends with a ToolFinished event
                    if call.id in begun:
                        emit(ToolFinished(call.id, call.name, INTERRUPTED_RESULT, True, 0.0))
            return [
                task.result()
                if task in done and not task.cancelled()
                else CallOutcome(INTERRUPTED_RESULT, True)
                for task in tasks
            ]

    async def run_call(self, call: ToolCall, ctx: ToolContext[Any], emit: EventSink) -> CallOutcome:
        """One call from start to finish, on its own (a durable worker runs each call as one
        activity; the batch logic above stays with the turn)."""
        return await self._run_one(call, ctx, emit)

    async def _run_one(self, call: ToolCall, ctx: ToolContext[Any], emit: EventSink) -> CallOutcome:
        with self.telemetry.tool_call(call.name, call.id) as observed:
            return await self._run_observed(call, ctx, emit, observed)

    async def _run_observed(
        self, call: ToolCall, ctx: ToolContext[Any], emit: EventSink, observed: Scope
    ) -> CallOutcome:
        started = time.monotonic()
        arguments: dict[str, Any] = {}
        try:
            tool, arguments = self._resolve(call)
            emit(ToolStarted(call.id, call.name, arguments))
            outcome = await self._guarded(tool, call, arguments, ctx)
        except ToolError as exc:
            emit(ToolStarted(call.id, call.name, arguments))
            outcome = CallOutcome(f"Error: {exc}", True)
        outcome.content = redact(outcome.content)
        if not outcome.is_error:
            outcome.content = await self.hooks.atransform_tool_result(
                call.name, outcome.content, arguments=arguments, task_id=ctx.task_id
            )
        outcome.content = cap_result(  # errors too: a tool may raise with megabytes of text
            outcome.content,
            limit=self._limit(call.name),
            spill_dir=self.settings.spill_dir,
            call_id=call.id,
            tool_name=call.name,
        )
        await self.hooks.aemit(
            "post_tool_call",
            tool_name=call.name,
            arguments=arguments,
            result=outcome.content,
            is_error=outcome.is_error,
            task_id=ctx.task_id,
        )
        duration = max(0.0, time.monotonic() - started - outcome.waited)
        emit(ToolFinished(call.id, call.name, outcome.content, outcome.is_error, duration))
        observed.tool_done(arguments, outcome.content, outcome.is_error)
        return outcome

    def _limit(self, name: str) -> int:
        tool = self.tools.get(name)
        return (
            tool.max_result_chars if tool and tool.max_result_chars else self.settings.result_limit
        )

    def _resolve(self, call: ToolCall) -> tuple[Tool, dict[str, Any]]:
        tool = self.tools.get(call.name)
        if tool is None:
            available = ", ".join(sorted(self.tools)) or "none"
            raise ToolError(f"unknown tool {call.name!r}. Available tools: {available}.")
        return tool, _checked(tool, call.arguments)

    async def _guarded(
        self, tool: Tool, call: ToolCall, arguments: dict[str, Any], ctx: ToolContext[Any]
    ) -> CallOutcome:
        guard = await self.hooks.pre_tool_call(
            call.name, arguments, task_id=ctx.task_id, session_id=ctx.session_id
        )
        if guard.blocked:
            return CallOutcome(f"Blocked by a hook: {guard.blocked}", True)
        if guard.arguments is not arguments:
            try:
                arguments = _checked(tool, guard.arguments)
            except ToolError as exc:
                return CallOutcome(f"Error: a plugin rewrote the arguments badly: {exc}", True)
        if writes_files(tool):
            assessment = assess_write_call(tool, arguments, ctx)
        else:
            boundary = _boundary(ctx.sandbox) if call.name in RUNS_CODE else SANDBOXED
            assessment = assess_tool_call(
                call.name, arguments, ctx.cwd, ctx.home, tool.assess, boundary
            )
        if guard.ask is not None and assessment is None:
            assessment = _hook_asks(call.name, arguments, guard.ask)
        ctx.approver = CallApprover(
            self.approvals,
            self.interactions,
            self.settings.approval_timeout,
            call.id,
            call.name,
            arguments,
        )
        waited = 0.0
        if assessment is not None:
            asked = time.monotonic()
            waved = guard.approved or (guard.allowed and not assessment.needs_a_human)
            with self.telemetry.approval(call.name, assessment.command) as observed:
                denial = await self._approve(assessment, ctx.approver, call, arguments, waved)
                observed.decided("approved" if denial is None else "denied")
            waited = time.monotonic() - asked
            if denial is not None:
                denial.waited = waited
                return denial
            ctx.approved = assessment.command
        ctx.call_tool = InnerCalls(self, ctx)
        outcome = await self._invoke(tool, arguments, ctx)
        outcome.waited = waited
        return outcome

    async def _approve(
        self,
        assessment: Assessment,
        approver: ToolApprover,
        call: ToolCall,
        arguments: dict[str, Any],
        pre_approved: bool,
    ) -> CallOutcome | None:
        """None when the call may run; otherwise the denial the model will read (also kept
        in `approvals.denials`)."""
        denial = await self._decide(assessment, approver, call, arguments, pre_approved)
        if denial is not None:
            self.approvals.denials.append(Denial(call.name, assessment.command, denial.content))
        return denial

    async def _decide(
        self,
        assessment: Assessment,
        approver: ToolApprover,
        call: ToolCall,
        arguments: dict[str, Any],
        pre_approved: bool,
    ) -> CallOutcome | None:
        if assessment.blocked:
            return CallOutcome(
                f"BLOCKED: {assessment.reason}. This is never allowed, in any "
                "mode; do not try to work around it.",
                True,
            )
        if pre_approved:
            return None
        undecided = not self.approvals.is_granted(assessment.command) and (
            self.approvals.mode != "off"
        )  # a grant or approvals off settle it before any hook is asked
        if undecided and self.hooks.has("permission_request"):
            answers = await self.hooks.ask(
                "permission_request",
                tool_name=call.name,
                arguments=arguments,
                reason=assessment.reason,
            )
            denied = next(
                (a["deny"] for a in answers if isinstance(a, dict) and a.get("deny")), None
            )
            if denied is not None:
                return CallOutcome(f"Denied by a PermissionRequest hook: {denied}", True)
            if not assessment.needs_a_human and any(
                isinstance(a, dict) and a.get("allow") for a in answers
            ):
                return None
        verdict = await approver.ask(
            assessment.command,
            assessment.reason,
            tool_name=call.name,
            arguments=arguments,
            needs_a_human=assessment.needs_a_human,
        )
        if verdict == "approved":
            return None
        if verdict == "unattended":
            return _refused_unattended(assessment)
        if verdict == "no_one":
            return CallOutcome(
                f"Denied: this needs the user's approval ({assessment.reason}) "
                "and no one is available to approve it in this session. Do not "
                "retry it; find a safer way or tell the user what you need.",
                True,
            )
        if verdict == "timed_out":
            return CallOutcome(
                "Denied: the approval request timed out.", True, halt="approval timed out"
            )
        return CallOutcome(
            f"Denied by the user: {assessment.command!r} was not approved. "
            "Do not retry it; ask the user how to proceed.",
            True,
        )

    async def _invoke(
        self, tool: Tool, arguments: dict[str, Any], ctx: ToolContext[Any]
    ) -> CallOutcome:
        kwargs = dict(arguments)
        if tool.context_param:
            kwargs[tool.context_param] = ctx
        timeout = tool.timeout or self.settings.default_timeout
        try:
            # in this task: no task per call; a sync handler that overstays is abandoned to
            # its thread (see talaria.offload), never waited for
            async with asyncio.timeout(timeout):
                text = await _produce(tool, kwargs)
        except TimeoutError:
            ctx.interrupt.set()
            return CallOutcome(f"Error: {tool.name} timed out after {timeout:g} s.", True)
        except ToolError as exc:
            return CallOutcome(f"Error: {exc}", True)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # a tool's sys.exit() fails the call, not the process
            log.debug("tool %s raised", tool.name, exc_info=True)
            return CallOutcome(failure_text(tool.name, exc), True)
        return CallOutcome(text, is_error=ctx.interrupt.is_set())


class InnerCalls:
    """`ToolContext.call_tool` for one running call: each call it makes is a call of its own
    (id `<outer id>.<n>`) with its own hooks, approval and events, exactly as if the model had
    made it, so a tool that calls tools can do no more than the model could directly."""

    def __init__(self, executor: ToolExecutor, outer: ToolContext) -> None:
        self._executor = executor
        self._outer = outer
        self._count = 0

    @property
    def tools(self) -> Mapping[str, Tool]:
        return self._executor.tools

    async def __call__(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        self._count += 1
        outer = self._outer
        call = ToolCall(f"{outer.call_id}.{self._count}", name, json.dumps(arguments))
        inner = dataclasses.replace(outer, call_id=call.id, approved="", call_tool=None)
        outcome = await self._executor.run_call(call, inner, outer.emit)
        if outcome.halt:
            raise ToolError(f"{name}: {outcome.content} (the turn stops: {outcome.halt})")
        return outcome.content, outcome.is_error


async def _produce(tool: Tool, kwargs: dict[str, Any]) -> str:
    """Run the handler and render what it returned, both on the user lane for a sync handler
    (rendering runs user code too: `__str__`, a generator's body)."""
    if tool.is_async:
        value = await tool.handler(**kwargs)
    else:
        value = await run_user_code(_call_and_render, tool.handler, kwargs)
        if isinstance(value, str):
            return value
    if inspect.isawaitable(value):  # a sync callable that returned a coroutine
        value = await value
    if isinstance(value, AsyncIterator):
        value = await _drain(value)
    return value if isinstance(value, str) else await run_user_code(serialise_result, value)


def _call_and_render(handler: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """The handler's result as text, or as it is when only the event loop can finish it."""
    value = handler(**kwargs)
    if inspect.isawaitable(value) or isinstance(value, AsyncIterator):
        return value
    return serialise_result(value)


async def _drain(items: AsyncIterator[Any]) -> Iterator[Any]:
    """The items of an async generator a tool returned (up to the stream budget), rendered
    one per line as a generator's are."""
    taken: list[Any] = []
    async for item in items:
        taken.append(item)
        if len(taken) >= STREAM_ITEMS:
            break
    return iter(taken)


def _checked(tool: Tool, raw: str | dict[str, Any]) -> dict[str, Any]:
    """The arguments checked against the schema, then by the tool's own `precheck`; a
    ToolError that says what to fix when they do not fit."""
    try:
        arguments = validate_arguments(tool.parameters, raw)
    except ArgumentError as exc:
        raise ToolError(_invalid(tool.name, str(exc))) from None
    if tool.precheck is not None:
        try:
            tool.precheck(arguments)
        except ToolError as exc:
            raise ToolError(_invalid(tool.name, str(exc))) from None
    return arguments


def _invalid(name: str, problems: str) -> str:
    return (
        f"invalid arguments for {name}: {problems}. The call was not executed; fix the "
        "arguments and call again."
    )


def failure_text(name: str, exc: BaseException) -> str:
    """What the model reads when a handler raised: the tool and the failure in words."""
    if isinstance(exc, AbortedByUserCode):
        exc = exc.raised
    if isinstance(exc, SystemExit):
        code = exc.code
        if isinstance(code, str) and code.strip():
            return f"Error: {name} failed: {code.strip()}"
        status = 0 if code is None else code
        return (
            f"Error: {name} tried to end the process (exit status {status}); the call failed "
            "and nothing else was stopped."
        )
    if isinstance(exc, KeyboardInterrupt):
        return f"Error: {name} stopped itself with an interrupt; the call failed."
    detail = _message(exc)
    if not detail:
        return f"Error: {name} failed unexpectedly and gave no reason."
    return f"Error: {name} failed: {detail}"


def _message(exc: BaseException) -> str:
    try:
        return str(exc).strip()
    except Exception:  # an exception whose own __str__ fails
        return ""


def _boundary(policy: Any) -> Boundary:
    """Whether a command would run confined: under a sandbox mode that confines, on a
    machine where bubblewrap works (or where `sandbox.required` refuses instead)."""
    if policy is None or not policy.confines:
        return UNCONFINED
    support = policy.support()  # cached once per process
    return Boundary(sandboxed=bool(support.available and support.bwrap) or policy.required)


def _hook_asks(tool_name: str, arguments: dict[str, Any], reason: str) -> Assessment:
    """The approval a PreToolUse hook's "ask" raises for a call the policy would let run."""
    shown = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return Assessment(f"{tool_name} {shown}", f"a hook asks: {reason}", f"hook ask {tool_name}")


def _refused_unattended(assessment: Assessment) -> CallOutcome:
    """Approvals are off and nobody can give the yes this call needs."""
    if assessment.pattern.startswith("write "):
        advice = (
            "Write inside the sandbox's writable roots instead. If it truly must be written "
            "there, tell the user why; only they can allow it (by answering an approval, or "
            "by choosing sandbox.mode full-access)."
        )
    elif assessment.command.startswith(ESCALATED):
        advice = (
            "Run the command without escalate=true: it then runs inside the sandbox. If it "
            "truly must run outside, tell the user why; only they can allow it (by answering "
            "an approval, or by choosing sandbox.mode full-access)."
        )
    else:
        advice = (
            "Write the paths or process ids out literally so they can be checked, or tell "
            "the user what you need."
        )
    return CallOutcome(
        f"Refused: {assessment.reason}. Approvals are off, so nobody can allow this, and it "
        f"never runs unattended. {advice}",
        True,
    )


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _is_barrier(tools: Mapping[str, Tool], call: ToolCall) -> bool:
    tool = tools.get(call.name)
    return tool is not None and tool.interactive
