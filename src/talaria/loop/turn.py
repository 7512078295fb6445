"""One turn of the seed's lifecycle: user message in, final answer (or a clean stop) out.

The phases live in their own modules (prepare, stream, the caller, the tool executor); this
module only sequences them and decides how the turn ends.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from talaria.events import (
    Notice,
    StatusChanged,
    StepFinished,
    ThinkingStarted,
    TurnFinished,
    TurnStarted,
)
from talaria.loop.budget import SUMMARY_REQUEST, IterationBudget
from talaria.loop.interrupt import Interrupted
from talaria.loop.prepare import build_messages, build_request
from talaria.loop.runtime import Runtime
from talaria.loop.session import SessionHandle
from talaria.loop.stream import EventStream
from talaria.providers.base import ModelResponse, ToolCall, Usage
from talaria.providers.errors import ProviderError
from talaria.tools.base import ToolContext

log = logging.getLogger("talaria.loop")


@dataclass
class TurnState:
    task_id: str
    budget: IterationBudget
    usage: Usage = field(default_factory=Usage)
    api_calls: int = 0
    final_response: str | None = None
    exit_reason: str = "running"
    error: str | None = None
    model: str = ""
    provider: str = ""
    api_mode: str = ""


async def run_turn(
    rt: Runtime, session: SessionHandle, user_message: str, task_id: str
) -> TurnState:
    rt.caller.chain.reset_turn()
    active = rt.caller.chain.active
    state = TurnState(task_id=task_id, budget=IterationBudget(rt.max_iterations),
                      model=active.model, provider=active.provider, api_mode=active.api_mode)
    rt.emit(TurnStarted(task_id, session.id, user_message))
    session.append({"role": "user", "content": user_message})
    try:
        await _steps(rt, session, state)
    except Interrupted:
        state.exit_reason = "interrupted"
    except ProviderError as error:
        state.exit_reason = f"failed:{error.kind.value}"
        state.error = str(error)
    finally:
        session.flush()
        state.usage.add(rt.drain_side_usage())
    rt.emit(StatusChanged("idle"))
    rt.emit(TurnFinished(state.exit_reason, state.final_response, state.api_calls))
    return state


async def _steps(rt: Runtime, session: SessionHandle, state: TurnState) -> None:
    while True:
        if rt.interrupt.is_set:
            raise Interrupted
        if state.budget.exhausted:
            await _summarise(rt, session, state)
            return
        if rt.context_engine is not None:
            await rt.context_engine.before_request(rt, session, state)
        response = await _call(rt, session, state, [state.budget.warning() or ""])
        state.budget.spend()
        session.append(response.to_message())
        if not response.tool_calls:
            state.final_response = response.text or ""
            state.exit_reason = "text_response"
            rt.emit(StepFinished(state.api_calls, state.api_calls, [], response.text))
            return
        halt = await _run_tools(rt, session, state, response.tool_calls)
        rt.emit(StepFinished(state.api_calls, state.api_calls,
                             [call.name for call in response.tool_calls], response.text))
        if rt.interrupt.is_set:
            raise Interrupted
        if halt:
            state.exit_reason = f"halted:{halt}"
            state.final_response = response.text or None
            return


async def _call(
    rt: Runtime,
    session: SessionHandle,
    state: TurnState,
    ephemeral: list[str],
    *,
    tool_choice: str = "auto",
) -> ModelResponse:
    config = rt.config
    messages = build_messages(session.system_prompt, session.history, ephemeral)
    request = build_request(
        messages,
        rt.tool_schemas,
        stream=rt.stream,
        max_tokens=config.get("model.max_tokens"),
        cache_ttl=config.get("prompt_caching.ttl") if config.get("prompt_caching.enabled") else None,
        tool_choice=tool_choice,
    )
    rt.hooks.emit("pre_llm_call", request=request, session_id=session.id, task_id=state.task_id)
    stream = EventStream(rt.emit, state.api_calls + 1)
    rt.emit(StatusChanged("thinking"))
    rt.emit(ThinkingStarted(state.api_calls + 1))
    try:
        result = await rt.caller.call(request, stream, rt.interrupt)
    finally:
        stream.stop_thinking()
    state.api_calls += result.attempts
    response = result.response
    client = result.client
    state.model, state.provider, state.api_mode = client.model, client.provider, client.api_mode
    _price(response, client.model, client.provider)
    state.usage.add(response.usage)
    if rt.context_engine is not None:
        rt.context_engine.record_usage(response.usage, len(messages))
    if response.reasoning and not rt.stream:
        stream.reasoning(response.reasoning)
    rt.hooks.emit("post_llm_call", response=response, session_id=session.id, task_id=state.task_id)
    return response


def _price(response: ModelResponse, model: str, provider: str) -> None:
    from talaria.providers.pricing import estimate_cost

    response.usage.estimated_cost_usd = estimate_cost(model, response.usage, provider)


async def _run_tools(
    rt: Runtime, session: SessionHandle, state: TurnState, calls: list[ToolCall]
) -> str | None:
    rt.emit(StatusChanged("executing_tools", ", ".join(call.name for call in calls)))

    def make_context(call: ToolCall, cancel: threading.Event) -> ToolContext:
        return ToolContext(
            task_id=state.task_id,
            session_id=session.id,
            cwd=rt.cwd,
            home=rt.home,
            interrupt=cancel,
            emit=rt.emit,
            call_id=call.id,
            clarify=rt.clarify,
            services=rt.services,
        )

    batch = await rt.executor.run_batch(calls, make_context, rt.interrupt, rt.emit)
    session.append(*batch.messages)
    return batch.halt


async def _summarise(rt: Runtime, session: SessionHandle, state: TurnState) -> None:
    """Exactly one tool-free request asking for a summary, then stop."""
    rt.emit(Notice("warning", f"iteration budget of {state.budget.limit} reached; asking for a "
                              "summary"))
    response = await _call(rt, session, state, [SUMMARY_REQUEST], tool_choice="none")
    message = response.to_message()
    message.pop("tool_calls", None)
    if not message.get("content"):
        message["content"] = "(The iteration budget ran out before a summary was written.)"
    session.append(message)
    state.final_response = message["content"]
    state.exit_reason = "max_iterations_reached"


def result_dict(state: TurnState, session: SessionHandle, interrupt_message: str | None) -> dict[str, Any]:
    failed = state.exit_reason.startswith("failed")
    result: dict[str, Any] = {
        "final_response": state.final_response,
        "messages": list(session.history),
        "completed": state.exit_reason == "text_response",
        "interrupted": state.exit_reason == "interrupted",
        "failed": failed,
        "api_calls": state.api_calls,
        "turn_exit_reason": state.exit_reason,
        "session_id": session.id,
        "task_id": state.task_id,
        "model": state.model,
        "provider": state.provider,
        "api_mode": state.api_mode,
        "usage": state.usage.to_dict(),
    }
    if failed:
        result["error"] = state.error
    if interrupt_message:
        result["interrupt_message"] = interrupt_message
    return result
