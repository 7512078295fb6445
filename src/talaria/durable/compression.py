"""Compression inside the turn workflow: the normal loop's context driver and the default
compressor, with the driver's two effects made activities.

The decision (how large the context is, what to cut, what the new history is) is the driver's
and the compressor's own and runs in the workflow, deterministically. The summary request runs on a
worker (`summarise`), and the hand-over to the child session is one store transaction on a
worker (`continue_session`) under an id the workflow chose. Both results are in the
workflow's history, so a replayed turn reuses them: it never asks for a summary again and
never starts a second child.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow

from talaria.context.compressor import Compressor
from talaria.durable.protocol import (
    ContinueInput,
    SummaryInput,
    error_from_dict,
    payload_messages,
    response_from_dict,
)
from talaria.loop.context import ContextDriver

if TYPE_CHECKING:
    from talaria.config import Config
    from talaria.core import Message, ModelResponse
    from talaria.durable.seams import TurnScope
    from talaria.loop.runtime import Runtime
    from talaria.loop.session import SessionHandle

COMPRESSION_SETTINGS = (
    "compression.enabled", "compression.threshold", "compression.protect_last_n",
    "context.engine", "model.context_length",
)  # fmt: skip
"""What the workflow's compressor reads (the window is the worker's answer for the model)."""


class DurableContext(ContextDriver):
    """The default compressor, its summary and hand-over run by workers."""

    def __init__(self, config: Config, scope: TurnScope) -> None:
        super().__init__(Compressor(config), config)
        self.scope = scope

    async def _summary_call(self, rt: Runtime, request: list[Message]) -> ModelResponse:
        scope = self.scope
        outcome = await rt.interrupt.race(
            workflow.execute_activity(
                "summarise",
                SummaryInput(scope.session.id, payload_messages(request), scope.agent),
                result_type=dict,
                **scope.timeouts.options(scope.timeouts.model_call),
            )
        )
        if outcome.get("error"):
            raise error_from_dict(outcome["error"])
        response = response_from_dict(outcome["response"])
        rt.add_side_usage(response.usage, outcome["model"], outcome["provider"])
        return response

    async def _continue_in_child(
        self, rt: Runtime, session: SessionHandle, history: list[Message]
    ) -> str:
        scope = self.scope
        child_id = f"{workflow.now():%Y%m%d_%H%M%S}_{workflow.uuid4().hex[:6]}"
        active = rt.caller.chain.active
        hand_over = ContinueInput(
            session.id, child_id, payload_messages(history), session.system_prompt,
            active.model, active.provider, active.api_mode,
            unsaved=scope.session.take(), writer=scope.writer,
        )  # fmt: skip
        await workflow.execute_activity(
            "continue_session", hand_over, **scope.timeouts.options(60, heartbeat=False)
        )
        return child_id


def durable_context(config: Config, scope: TurnScope) -> DurableContext | None:
    """The workflow's context: the default compressor, unless compression is off.
    A custom `context.engine` class is the worker's code, which a workflow cannot run."""
    if not config.compression.enabled:
        return None
    if config.context.engine != "default":
        return None
    return DurableContext(config, scope)
