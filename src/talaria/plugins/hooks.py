"""The hook bus: plugins observe and steer the loop at fixed points.

Hooks are plain callables called with keyword arguments (accept ``**kwargs`` to stay compatible
as arguments are added). A failing observer hook is logged and skipped (whatever it raises,
`SystemExit` included); a failing or slow
`pre_tool_call` hook blocks the call, because a guard that cannot answer must not wave
things through. Hooks are user code that may block: the loop runs them on the process's user
lane (`talaria.offload`), so a slow or hung hook delays only the call it guards.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from talaria.offload import run_user_code

log = logging.getLogger("talaria.plugins")

HOOK_NAMES = (
    "pre_tool_call",
    "post_tool_call",
    "transform_tool_result",
    "pre_llm_call",
    "post_llm_call",
    "on_session_start",
    "on_session_end",
    "user_prompt_submit",
    "permission_request",
    "pre_compact",
    "stop",
    "subagent_stop",
)
"""The points of the loop hooks attach to. The last five answer through `ask`:
`user_prompt_submit` may return {"block": reason} or {"context": text}; `permission_request`
{"allow": True} or {"deny": reason}; `stop` and `subagent_stop` {"block": reason} to make the
model go on with that reason (SubagentStop: a delegate child's turn)."""

Hook = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class PreToolOutcome:
    """What the `pre_tool_call` hooks decided, folded in registration order."""

    arguments: dict[str, Any]
    blocked: str | None = None
    approved: bool = False
    allowed: bool = False
    """A settings hook said allow: ordinary approvals are skipped, never a sandbox crossing."""
    ask: str | None = None
    """A settings hook wants the user asked even when the policy would not ask."""


class HookBus:
    def __init__(self, pre_tool_timeout: float = 10.0) -> None:
        self._hooks: dict[str, list[Hook]] = {name: [] for name in HOOK_NAMES}
        self._timeouts: dict[str, list[float | None]] = {name: [] for name in HOOK_NAMES}
        self._pre_tool_timeout = pre_tool_timeout
        self.tools: list[Any] = []
        """Tools registered by plugins; the agent offers them beside its own."""
        self.skill_dirs: list[Path] = []
        """Folders of skills plugins bring (each holds skill folders, like `skills/`)."""

    def register_tool(self, tool: Any) -> None:
        self.tools.append(tool)

    def register_skill_dir(self, folder: str | Path) -> None:
        self.skill_dirs.append(Path(folder))

    def register(self, name: str, hook: Hook, *, timeout: float | None = None) -> None:
        """`timeout`: seconds the loop waits for this hook where it waits (the guards and
        `ask`); None: the default (`pre_tool_timeout` for a guard, no limit for the others)."""
        if name not in self._hooks:
            raise ValueError(f"unknown hook {name!r}; known hooks: {', '.join(HOOK_NAMES)}")
        self._hooks[name].append(hook)
        self._timeouts[name].append(timeout)

    def emit(self, name: str, **kwargs: Any) -> None:
        """Call every observer hook of `name`; failures are logged, never raised."""
        for hook in self._hooks[name]:
            try:
                hook(**kwargs)
            except BaseException:  # sys.exit() in a hook must not end the turn or the loop
                log.exception("plugin hook %s (%s) failed; skipped", name, _label(hook))

    def has(self, name: str) -> bool:
        return bool(self._hooks[name])

    async def aemit(self, name: str, **kwargs: Any) -> None:
        """`emit` for the loop: off the event loop (and free when nothing is registered)."""
        if self._hooks[name]:
            await run_user_code(self.emit, name, kwargs=kwargs)

    async def ask(self, name: str, **kwargs: Any) -> list[Any]:
        """Every hook's answer of `name`, in order (off the event loop). A hook that fails or
        overstays its timeout is logged and gives no answer."""
        answers = []
        for hook, timeout in zip(self._hooks[name], self._timeouts[name], strict=True):
            try:
                answers.append(await run_user_code(hook, kwargs=kwargs, timeout=timeout))
            except BaseException as exc:
                if isinstance(exc, asyncio.CancelledError):
                    raise
                log.warning("hook %s (%s) failed; skipped: %s", name, _label(hook), exc)
        return answers

    async def pre_tool_call(
        self, tool_name: str, arguments: dict[str, Any], **kwargs: Any
    ) -> PreToolOutcome:
        """Fold the guards: a hook may return None, {"block": reason}, {"arguments": {...}},
        {"approve": True}, or (settings hooks) {"allow": True} or {"ask": reason}. An
        exception or a timeout blocks the call (fail closed)."""
        outcome = PreToolOutcome(arguments=arguments)
        guards = zip(self._hooks["pre_tool_call"], self._timeouts["pre_tool_call"], strict=True)
        for hook, timeout in guards:
            try:
                answer = await run_user_code(
                    hook,
                    kwargs={**kwargs, "tool_name": tool_name, "arguments": dict(outcome.arguments)},
                    timeout=timeout or self._pre_tool_timeout,
                )
            except TimeoutError:
                return PreToolOutcome(arguments, blocked=f"plugin guard {_label(hook)} timed out")
            except Exception as exc:
                log.exception("pre_tool_call hook %s failed; blocking the call", _label(hook))
                return PreToolOutcome(
                    arguments, blocked=f"plugin guard {_label(hook)} failed: {exc}"
                )
            outcome = _fold(outcome, answer)
            if outcome.blocked:
                return outcome
        return outcome

    async def atransform_tool_result(self, tool_name: str, result: str, **kwargs: Any) -> str:
        if not self._hooks["transform_tool_result"]:
            return result
        return await run_user_code(self.transform_tool_result, tool_name, result, kwargs=kwargs)

    def transform_tool_result(self, tool_name: str, result: str, **kwargs: Any) -> str:
        for hook in self._hooks["transform_tool_result"]:
            try:
                changed = hook(tool_name=tool_name, result=result, **kwargs)
            except BaseException:
                log.exception("transform_tool_result hook %s failed; skipped", _label(hook))
                continue
            if isinstance(changed, str):
                result = changed
        return result


def _fold(outcome: PreToolOutcome, answer: Any) -> PreToolOutcome:
    if not answer:
        return outcome
    if not isinstance(answer, dict):
        return PreToolOutcome(outcome.arguments, blocked=f"plugin guard returned {answer!r}")
    if answer.get("block"):
        return PreToolOutcome(outcome.arguments, blocked=str(answer["block"]))
    arguments = answer.get("arguments")
    ask = answer.get("ask")
    return PreToolOutcome(
        arguments if isinstance(arguments, dict) else outcome.arguments,
        approved=outcome.approved or bool(answer.get("approve")),
        allowed=outcome.allowed or bool(answer.get("allow")),
        ask=str(ask) if ask else outcome.ask,
    )


def _label(hook: Hook) -> str:
    return getattr(hook, "__qualname__", None) or repr(hook)
