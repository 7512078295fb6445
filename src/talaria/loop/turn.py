"""One turn of the lifecycle in docs/architecture.md: user message in, final answer (or a clean
stop) out.

The phases live in their own modules (prepare, stream, the caller, the tool executor); this
module only sequences them and decides how the turn ends.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from talaria.core import (
    Content,
    Message,
    ModelClient,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolMessage,
    TurnResult,
    Usage,
    exit_reason,
    failed,
    halted,
)
from talaria.core.telemetry import TurnStart
from talaria.events import (
    Notice,
    StatusChanged,
    SteerDelivered,
    StepFinished,
    ThinkingStarted,
    TurnFinished,
    TurnStarted,
)
from talaria.interrupt import Interrupted
from talaria.loop.budget import SUMMARY_REQUEST, IterationBudget
from talaria.loop.guard import REFUSED_RESULT, STOPPED_RESULT, LoopGuard
from talaria.loop.output_limit import output_limit, served_window
from talaria.loop.prepare import build_messages, build_request
from talaria.loop.repair_response import obtain_response
from talaria.loop.runtime import Runtime
from talaria.loop.session import SessionHandle
from talaria.loop.spending import ACTIVE_METER, BUDGET_SUMMARY_REQUEST, SpendMeter, open_meter
from talaria.loop.steering import joined
from talaria.loop.stream import STEP_SEPARATOR, EventStream
from talaria.messages.media import media_dir
from talaria.offload import run_blocking
from talaria.providers.base import UsageLedger
from talaria.providers.errors import ProviderError
from talaria.providers.profiles import profile_of
from talaria.providers.resilience.caller import CallResult
from talaria.providers.resilience.chain import ChainEntry
from talaria.providers.resilience.retry import Action, action_for
from talaria.providers.transport.sent import when_sent
from talaria.store.base import StoreError
from talaria.tools.base import ToolContext

if TYPE_CHECKING:
    from talaria.agent_tools.services import AgentServices

log = logging.getLogger("talaria.loop")

ABANDONED_RESULT = "Error: the turn ended before this tool call finished."
MAX_OVERFLOW_RETRIES = 3
"""Compress-and-resend rounds after context-overflow errors in one model call."""
MAX_STOP_ROUNDS = 5
"""Times a Stop hook may send the model back to work in one turn."""


@dataclass
class TurnState:
    """One turn's running totals and, at the end, its outcome."""

    task_id: str
    budget: IterationBudget
    usage: Usage = field(default_factory=Usage)
    api_calls: int = 0
    final_response: str | None = None
    spoken: list[str] = field(default_factory=list)
    """The text of each step that had some: the final answer is all of it, as it streamed."""
    exit_reason: str = "running"
    error: str | None = None
    model: str = ""
    provider: str = ""
    api_mode: str = ""
    guard: LoopGuard = field(default_factory=LoopGuard)
    meter: SpendMeter | None = None
    """The turn's spend against its budgets (None: no budget applies)."""
    models: UsageLedger = field(default_factory=UsageLedger)
    """This agent's own spend by model (children record theirs in their own sessions)."""
    stop_rounds: int = 0
    """Times a stop hook sent the model back to work this turn."""


async def run_turn(
    rt: Runtime, session: SessionHandle, user_message: Content, task_id: str
) -> TurnState:
    active = rt.caller.chain.active
    start = TurnStart(
        str(rt.config.telemetry.agent_name),
        session.id,
        task_id,
        active.model,
        active.provider,
        _text_of(user_message),
    )
    with rt.telemetry.turn(start) as observed:
        state = await _run_turn(rt, session, user_message, task_id)
        observed.turn_done(
            state.exit_reason,
            state.usage,
            state.api_calls,
            state.final_response,
            state.model,
            state.provider,
        )
    return state


async def _run_turn(
    rt: Runtime, session: SessionHandle, user_message: Content, task_id: str
) -> TurnState:
    rt.caller.start_turn()
    active = rt.caller.chain.active
    state = TurnState(
        task_id=task_id,
        budget=IterationBudget(rt.max_iterations),
        model=active.model,
        provider=active.provider,
        api_mode=active.api_mode,
    )
    if rt.budgets.per_session:
        state.meter = open_meter(rt.budgets, await run_blocking(_session_spent, session))
    else:
        state.meter = open_meter(rt.budgets, None)
    rt.emit(TurnStarted(task_id, session.id, _text_of(user_message)))
    await rt.sync_tools()
    session.skills_note = await _skills_note(rt, session)
    metering = ACTIVE_METER.set(state.meter)
    try:
        blocked, user_message = await _submit_hooks(rt, session, user_message)
        if blocked is not None:
            rt.emit(Notice("warning", f"the prompt was blocked by a hook: {blocked}"))
            state.exit_reason = halted("prompt blocked by a hook")
        else:
            await session.append({"role": "user", "content": user_message})
            await _steps(rt, session, state)
    except Interrupted:
        state.exit_reason = "interrupted"
    except ProviderError as error:
        state.exit_reason = failed(error.kind.value)
        state.error = str(error)
    except StoreError as error:
        state.exit_reason = failed("store")
        state.error = f"the session could not be saved: {error}"
    finally:
        if not state.models.entries:
            # No call was priced: the turn's cost is what the catalogue says about this model
            # (0.0, or None when unpriced). Asked only now, so that loading the catalogue
            # never delays a turn's first request.
            _price(state.usage, active)
        state.api_calls = rt.caller.turn_attempts
        if state.exit_reason != failed("store"):
            await _flush_quietly(session)
        if rt.interactions is not None:
            rt.interactions.withdraw_all("turn_ended")
        state.usage.add(rt.drain_side_usage())
        state.models.merge(rt.drain_side_models())
        ACTIVE_METER.reset(metering)
    rt.emit(StatusChanged("idle"))
    rt.emit(TurnFinished(state.exit_reason, state.final_response, state.api_calls))
    return state


async def _submit_hooks(
    rt: Runtime, session: SessionHandle, message: Content
) -> tuple[str | None, Content]:
    """(why a hook blocked the prompt, else None; the message with the context hooks add)."""
    if not rt.hooks.has("user_prompt_submit"):
        return None, message
    answers = await rt.hooks.ask(
        "user_prompt_submit", prompt=_text_of(message), session_id=session.id
    )
    answers = [a for a in answers if isinstance(a, dict)]
    blocked = next((str(a["block"]) for a in answers if a.get("block")), None)
    context = "\n\n".join(str(a["context"]) for a in answers if a.get("context"))
    if blocked is not None or not context:
        return blocked, message
    note = f"[Context from hooks]\n{context}"
    if isinstance(message, str):
        return None, f"{message}\n\n{note}"
    return None, [*message, {"type": "text", "text": note}]


async def _stop_hooks(rt: Runtime, session: SessionHandle, state: TurnState) -> bool:
    """Whether a Stop (a child's: SubagentStop) hook sent the model back to work; its reason
    is then the next user message."""
    if not rt.hooks.has(rt.stop_hook) or state.stop_rounds >= MAX_STOP_ROUNDS:
        return False
    answers = await rt.hooks.ask(
        rt.stop_hook,
        session_id=session.id,
        final_response=state.spoken[-1] if state.spoken else "",
        stop_hook_active=state.stop_rounds > 0,
    )
    reason = next((a["block"] for a in answers if isinstance(a, dict) and a.get("block")), None)
    if not reason:
        return False
    state.stop_rounds += 1
    await session.append({"role": "user", "content": f"[A stop hook asks you to go on] {reason}"})
    return True


async def _skills_note(rt: Runtime, session: SessionHandle) -> str | None:
    """The skills on disk now against those the session's stored prompt lists (a skill
    another process or `skill_manage` wrote is in the next turn's index)."""
    catalog = rt.skills
    if catalog is None or "skill_view" not in rt.tools or rt.profile == "lean":
        return None
    from talaria.skills.index import changes_note

    skills = await run_blocking(catalog.skills)
    return changes_note(skills, int(rt.config.skills.index_chars), session.system_prompt)


def _session_spent(session: SessionHandle) -> Usage | None:
    """The session's stored totals before this turn (for the per-session budgets)."""
    if session.store is None:
        return None
    try:
        info = session.store.get_session(session.id)
    except StoreError:
        return None
    return Usage.from_dict(info.usage) if info is not None and info.usage else None


async def _flush_quietly(session: SessionHandle) -> None:
    """A save that fails here stays pending in the handle; the next append retries it."""
    try:
        await session.flush()
    except StoreError:
        log.warning(
            "session %s: %d message(s) not saved yet; the next save retries them",
            session.id,
            session.unsaved,
        )


async def _steps(rt: Runtime, session: SessionHandle, state: TurnState) -> None:
    while True:
        if rt.interrupt.is_set:
            raise Interrupted
        if state.budget.exhausted:
            await _summarise(rt, session, state)
            return
        if state.meter is not None and await _over_budget(rt, session, state, state.meter):
            return
        if rt.context is not None:
            await rt.context.before_request(rt, session, state)
        notes = [
            state.budget.warning() or "",
            state.guard.take_note() or "",
            session.cwd_note or "",
            session.skills_note or "",
            session.skills_in_use or "",
        ]
        response = await _call(rt, session, state, notes)
        state.budget.spend()
        if response.text:
            state.spoken.append(response.text)
        if not response.tool_calls:
            await session.append(response.to_message())
            state.final_response = STEP_SEPARATOR.join(state.spoken)
            state.exit_reason = "text_response"
            rt.emit(StepFinished(state.api_calls, state.api_calls, [], response.text))
            if await _stop_hooks(rt, session, state):
                continue
            return
        decision = state.guard.review(response.tool_calls)
        if decision.stop_reason:
            await session.append(
                response.to_message(), *_unrun(response.tool_calls, STOPPED_RESULT)
            )
            rt.emit(Notice("warning", decision.stop_reason))
            state.final_response = decision.stop_reason
            state.exit_reason = "loop_detected"
            return
        halt = await _tool_step(rt, session, state, response, set(decision.refused))
        rt.emit(
            StepFinished(
                state.api_calls,
                state.api_calls,
                [call.name for call in response.tool_calls],
                response.text,
            )
        )
        if rt.interrupt.is_set:
            raise Interrupted
        if halt:
            state.exit_reason = halted(halt)
            state.final_response = STEP_SEPARATOR.join(state.spoken) or None
            return
        await _deliver_steers(rt, session, state)


async def _deliver_steers(rt: Runtime, session: SessionHandle, state: TurnState) -> None:
    """The user's steers join the conversation here: after every result of the step's tool
    calls, before the next model call. Stored as the user note they are, so a resumed session
    reads what the model read."""
    steers = rt.steering.take_steers()
    if not steers:
        return
    await session.append({"role": "user", "content": joined(steers)})
    rt.emit(SteerDelivered([note.id for note in steers], state.api_calls + 1, state.task_id))


async def _call(
    rt: Runtime,
    session: SessionHandle,
    state: TurnState,
    ephemeral: list[str],
    *,
    tool_choice: str = "auto",
) -> ModelResponse:
    config = rt.config
    sent: list[Message] = []
    media = media_dir(rt.home) if config.model.vision is not False else None
    max_tokens = await output_limit(rt)

    def build(extra: list[str]) -> ModelRequest:
        messages = build_messages(
            session.system_prompt, session.history, [*ephemeral, *extra], session.repair
        )
        sent[:] = messages
        return build_request(
            messages,
            rt.tool_schemas,
            stream=rt.stream,
            max_tokens=max_tokens,
            cache_ttl=config.prompt_caching.ttl if config.prompt_caching.enabled else None,
            tool_choice=tool_choice,
            media=media,
        )

    if rt.hooks.has("pre_llm_call"):
        await rt.hooks.aemit(
            "pre_llm_call", request=build([]), session_id=session.id, task_id=state.task_id
        )
    stream = EventStream(rt.emit, state.api_calls + 1, STEP_SEPARATOR if state.spoken else "")
    rt.emit(StatusChanged("thinking"))
    rt.emit(ThinkingStarted(state.api_calls + 1))
    try:
        with when_sent(rt.request_sent):
            result = await _obtain(rt, session, state, build, stream)
    except Interrupted:
        spent = _spent_before_interrupt(rt, sent, stream)
        state.usage.add(spent)
        active = rt.caller.chain.active
        state.models.add(active.model, active.provider, spent)
        if state.meter is not None:
            state.meter.charge(spent)
        raise
    finally:
        stream.stop_thinking()
    state.api_calls = rt.caller.turn_attempts
    response = result.response
    client = result.client
    state.model, state.provider, state.api_mode = client.model, client.provider, client.api_mode
    _price(result.usage, client)
    state.usage.add(result.usage)
    state.models.add(client.model, client.provider, result.usage)
    if state.meter is not None:
        state.meter.charge(result.usage)
        state.meter.budgets.request_size.record_usage(response.usage.prompt_tokens, len(sent))
    if rt.context is not None:
        rt.context.record_usage(response.usage, len(sent))
    if response.reasoning and not rt.stream:
        stream.reasoning(response.reasoning)
    await rt.hooks.aemit(
        "post_llm_call", response=response, session_id=session.id, task_id=state.task_id
    )
    return response


async def _obtain(
    rt: Runtime,
    session: SessionHandle,
    state: TurnState,
    build: Callable[[list[str]], ModelRequest],
    stream: EventStream,
) -> CallResult:
    """A usable response; a prompt too long for the window is compressed and resent while
    compression still makes room (a few times at most)."""
    text_calls = bool(rt.config.tools.text_calls)
    window = await served_window(rt)
    for _ in range(MAX_OVERFLOW_RETRIES):
        try:
            return await obtain_response(
                rt.caller, build, stream, rt.interrupt, text_calls=text_calls, window=window
            )
        except ProviderError as error:
            if action_for(error.kind) is not Action.COMPRESS or rt.context is None:
                raise
            rt.emit(Notice("warning", f"{error.message}; compressing the history and retrying"))
            if not await rt.context.compress(rt, session, state):
                raise
    return await obtain_response(
        rt.caller, build, stream, rt.interrupt, text_calls=text_calls, window=window
    )


def _price(usage: Usage, model: ModelClient | ChainEntry) -> None:
    """The catalogue's price (0.0 where the profile says the model is not billed, None for a
    model it does not know): set on the turn's usage at its end too when no call was priced,
    so a turn that fails before any answer reports its cost the same way as one that
    succeeds."""
    from talaria.providers.pricing import estimate_cost
    from talaria.providers.profiles.context_windows import served_by

    local = served_by(model.base_url) if model.provider == "custom" else None
    if local is not None:  # a local server found at a loopback URL given without --provider
        usage.estimated_cost_usd = estimate_cost(model.model, usage, local)
        return
    usage.estimated_cost_usd = estimate_cost(model.model, usage, model.provider, profile_of(model))


def _spent_before_interrupt(rt: Runtime, sent: list[Message], stream: EventStream) -> Usage:
    """An interrupted call sends no usage, but its tokens were spent: estimate them from the
    request and the output that streamed before the stop."""
    from talaria.context.tokens import estimate_text_tokens, estimate_tokens

    entry = rt.caller.chain.active
    usage = Usage(
        input_tokens=estimate_tokens(sent, rt.tool_schemas) if sent else 0,
        output_tokens=estimate_text_tokens("".join(stream.produced)),
    )
    _price(usage, entry)
    return usage


async def _tool_step(
    rt: Runtime,
    session: SessionHandle,
    state: TurnState,
    response: ModelResponse,
    refused: set[int],
) -> str | None:
    """The assistant message and its results, saved as one commit once the tools are done.
    A turn torn down mid-step (cancelled) still closes it: calls without a result get one."""
    session.stage(response.to_message())
    staged = session.history[-1]
    try:
        return await _run_tools(rt, session, state, response.tool_calls, refused)
    finally:
        if session.history[-1] is staged:
            session.stage(*_unrun(response.tool_calls, ABANDONED_RESULT))


async def _run_tools(
    rt: Runtime,
    session: SessionHandle,
    state: TurnState,
    calls: list[ToolCall],
    refused: set[int],
) -> str | None:
    """Run the calls the loop guard allows; refused ones get an error result in their place."""
    runnable = [call for index, call in enumerate(calls) if index not in refused]
    if refused:
        names = ", ".join(calls[index].name for index in sorted(refused))
        rt.emit(Notice("warning", f"loop guard: refused to run {names} again"))
    rt.emit(StatusChanged("executing_tools", ", ".join(call.name for call in runnable)))
    if rt.before_tools is not None and runnable:
        await rt.before_tools([call.name for call in runnable])

    def make_context(call: ToolCall, cancel: threading.Event) -> ToolContext[AgentServices | None]:
        return ToolContext(
            task_id=state.task_id,
            session_id=session.id,
            cwd=rt.cwd,
            home=rt.home,
            interrupt=cancel,
            emit=rt.emit,
            call_id=call.id,
            clarify=functools.partial(rt.clarify, call.id) if rt.clarify else None,
            services=rt.services,
            sandbox=rt.sandbox,
        )

    batch = await rt.executor.run_batch(runnable, make_context, rt.interrupt, rt.emit)
    results = iter(batch.messages)
    refusals = iter(_unrun([calls[index] for index in sorted(refused)], REFUSED_RESULT))
    messages = [next(refusals if index in refused else results) for index in range(len(calls))]
    state.guard.record_results(
        [
            None if index in refused else str(m.get("content", ""))
            for index, m in enumerate(messages)
        ]
    )
    await session.append(*messages)
    return batch.halt


def _text_of(content: Content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(part.get("text", "")) for part in content if part.get("type") == "text")


def _unrun(calls: list[ToolCall], content: str) -> list[ToolMessage]:
    """Error results for calls that were not run, so none is left unanswered (errors become data,
    docs/architecture.md)."""
    return [{"role": "tool", "tool_call_id": call.id, "content": content} for call in calls]


async def _summarise(
    rt: Runtime,
    session: SessionHandle,
    state: TurnState,
    notice: str | None = None,
    request: str = SUMMARY_REQUEST,
    exit_reason: str = "max_iterations_reached",
) -> None:
    """Exactly one tool-free request asking for a summary, then stop."""
    rt.emit(
        Notice(
            "warning",
            notice or f"iteration budget of {state.budget.limit} reached; asking for a summary",
        )
    )
    response = await _call(rt, session, state, [request], tool_choice="none")
    message = response.to_message()
    message.pop("tool_calls", None)
    summary = _without_spelled_calls(response.text or "", rt.tools)
    summary = summary or "(The budget ran out before a summary was written.)"
    message["content"] = summary
    await session.append(message)
    state.final_response = summary
    state.exit_reason = exit_reason


def _without_spelled_calls(text: str, tools: Collection[str]) -> str:
    """The summary without the tool calls a model wrote as text in it (a small model often
    answers the summary request with one more call): a call is never the answer."""
    from talaria.loop.text_tool_calls import find_text_tool_calls

    spelled = find_text_tool_calls(text, tools)
    return text if spelled is None else spelled.text.strip()


async def _over_budget(
    rt: Runtime, session: SessionHandle, state: TurnState, meter: SpendMeter
) -> bool:
    """End the turn when one more call and a summary would not fit in a budget: with the
    summary if it alone still fits, else with a note. False when the turn may go on."""
    from talaria.providers.pricing import estimate_cost

    active = rt.caller.chain.active
    prompt = meter.budgets.request_size.estimate(
        build_messages(session.system_prompt, session.history, [], repair=session.repair),
        rt.tool_schemas,
    )
    next_call = Usage(input_tokens=prompt, output_tokens=meter.output_reserve())
    next_call.estimated_cost_usd = estimate_cost(
        active.model, next_call, active.provider, profile_of(active)
    )
    if meter.unpriced(next_call) and active.label not in meter.budgets.unpriced_noted:
        meter.budgets.unpriced_noted.add(active.label)
        note = f"{active.label} has no known price: the cost budget is not enforced"
        rt.emit(Notice("warning", f"{note} (token budgets still are)"))
    verdict = meter.verdict(next_call)
    if verdict.exceeded is None:
        return False
    if verdict.summary_fits:
        notice = f"{verdict.exceeded} would be exceeded; asking for a summary"
        await _summarise(rt, session, state, notice, BUDGET_SUMMARY_REQUEST, "budget_exceeded")
        return True
    rt.emit(Notice("warning", f"{verdict.exceeded} is reached; stopping"))
    state.final_response = f"(Stopped: {verdict.exceeded} is reached; no summary fits in it.)"
    state.exit_reason = "budget_exceeded"
    return True


def result_dict(
    state: TurnState, session: SessionHandle, interrupt_message: str | None
) -> TurnResult:
    is_failed = exit_reason(state.exit_reason) == "failed"
    result: TurnResult = {
        "final_response": state.final_response,
        "messages": list(session.history),
        "completed": state.exit_reason == "text_response",
        "interrupted": state.exit_reason == "interrupted",
        "failed": is_failed,
        "api_calls": state.api_calls,
        "turn_exit_reason": state.exit_reason,
        "session_id": session.id,
        "task_id": state.task_id,
        "model": state.model,
        "provider": state.provider,
        "api_mode": state.api_mode,
        "usage": state.usage.to_dict(),
    }
    if is_failed:
        result["error"] = state.error
    if interrupt_message:
        result["interrupt_message"] = interrupt_message
    return result


def busy_result(busy: StoreError, session: SessionHandle, task_id: str) -> TurnResult:
    """The turn did not start: another writer holds the session. Nothing was appended."""
    state = TurnState(task_id=task_id, budget=IterationBudget(1))
    state.exit_reason = failed("session_busy")
    state.error = str(busy)
    return result_dict(state, session, None)
