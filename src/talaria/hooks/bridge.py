"""Settings hooks on the `HookBus`: each configured event becomes a bus hook of the matching
point, so they run where the in-process plugin hooks run, in the same order, with the same
outcomes (block, rewrite, allow, context). Exit code 2 blocks with stderr as the reason; JSON
on stdout may decide (`decision`, `hookSpecificOutput.permissionDecision`, `updatedInput`,
`additionalContext`); any other exit code, and a timeout, is a notice and changes nothing.

A hook's "allow" skips only an ordinary approval: a call that would cross the sandbox
(`Assessment.needs_a_human`) still needs the user, so no hook widens what the user chose.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from talaria.events import EventSink, Notice
from talaria.hooks.run import Answer, run_handler
from talaria.hooks.settings import Handler, HookSet
from talaria.plugins.hooks import HookBus

CONTEXT_EVENTS = frozenset({"UserPromptSubmit", "SessionStart"})
"""Events whose plain stdout (exit 0) is context for the model."""
SLACK = 5.0
"""Seconds the bus waits beyond the handlers' own timeouts before it gives up on them."""


@dataclass
class Verdict:
    """What the handlers of one event decided, folded in order (a block ends the run)."""

    block: str | None = None
    allow: bool = False
    ask: str | None = None
    updated_input: dict[str, Any] | None = None
    context: list[str] = field(default_factory=list)


class SettingsHooks:
    """The hooks of the settings files, for one agent."""

    def __init__(self, hooks: HookSet, cwd: Path, emit: EventSink, mode: Callable[[], str]):
        self.hooks = hooks
        self.cwd = cwd
        self.emit = emit
        self.mode = mode
        """The approval mode, as `permission_mode` in the payload."""
        self.session_id = ""
        self._started: set[str] = set()

    def register(self, bus: HookBus) -> None:
        """Each configured event's adapter, on its bus point (SessionStart runs with the
        session's first prompt, off the event loop, so it rides on `user_prompt_submit`)."""
        points: dict[str, tuple[str, Callable[..., Any]]] = {
            "PreToolUse": ("pre_tool_call", self.pre_tool_use),
            "PostToolUse": ("transform_tool_result", self.post_tool_use),
            "PostToolUseFailure": ("post_tool_call", self.post_tool_failure),
            "PermissionRequest": ("permission_request", self.permission_request),
            "PreCompact": ("pre_compact", self.pre_compact),
            "Stop": ("stop", self.stop),
            "SubagentStop": ("subagent_stop", self.subagent_stop),
            "SessionEnd": ("on_session_end", self.session_end),
        }
        for event, (point, hook) in points.items():
            if self.hooks.has(event):
                bus.register(point, hook, timeout=self._budget(event))
        if self.hooks.has("UserPromptSubmit") or self.hooks.has("SessionStart"):
            budget = self._budget("UserPromptSubmit") + self._budget("SessionStart")
            bus.register("user_prompt_submit", self.user_prompt_submit, timeout=budget)

    def _budget(self, event: str) -> float:
        groups = self.hooks.events.get(event, ())
        return sum(h.timeout for g in groups for h in g.handlers) + SLACK

    # ---- running and folding ----------------------------------------------------------

    def run(self, event: str, tool_name: str | None = None, **fields: Any) -> Verdict:
        """Run the handlers of `event` (that match `tool_name`) one after the other; blocking,
        so the bus calls it on the user lane."""
        payload = {
            "session_id": fields.pop("session_id", None) or self.session_id,
            "transcript_path": "",
            "cwd": str(self.cwd),
            "permission_mode": self.mode(),
            "hook_event_name": event,
            **({"tool_name": tool_name} if tool_name is not None else {}),
            **fields,
        }
        verdict = Verdict()
        for handler in self.hooks.handlers(event, tool_name):
            self._fold(verdict, event, handler, run_handler(handler, payload, self.cwd))
            if verdict.block is not None:
                break
        return verdict

    def _fold(self, verdict: Verdict, event: str, handler: Handler, answer: Answer) -> None:
        where = f"{event} hook `{handler.label}`"
        if answer.timed_out:
            self._notice(f"{where} timed out after {handler.timeout:g} s; ignored")
            return
        if answer.code == 2:
            verdict.block = answer.stderr.strip() or f"blocked by the {where}"
            return
        if answer.code != 0:
            detail = (answer.stderr.strip().splitlines() or [""])[0][:200]
            code = "did not run" if answer.code is None else f"failed (exit {answer.code})"
            self._notice(f"{where} {code}{': ' + detail if detail else ''}; ignored")
            return
        data = answer.data
        if data is None:
            if event in CONTEXT_EVENTS and answer.stdout.strip():
                verdict.context.append(answer.stdout.strip())
            return
        _decide(verdict, data)
        if isinstance(data.get("systemMessage"), str):
            self.emit(Notice("info", data["systemMessage"]))

    def _notice(self, message: str) -> None:
        self.emit(Notice("warning", message))

    # ---- the bus points ---------------------------------------------------------------

    def pre_tool_use(
        self, tool_name: str, arguments: dict[str, Any], session_id: str = "", **_: Any
    ) -> dict[str, Any] | None:
        verdict = self.run("PreToolUse", tool_name, tool_input=arguments, session_id=session_id)
        if verdict.block is not None:
            return {"block": verdict.block}
        answer: dict[str, Any] = {}
        if verdict.updated_input is not None:
            answer["arguments"] = {**arguments, **verdict.updated_input}
        if verdict.ask is not None:
            answer["ask"] = verdict.ask
        elif verdict.allow:
            answer["allow"] = True
        return answer or None

    def post_tool_use(
        self, tool_name: str, result: str, arguments: Any = None, **_: Any
    ) -> str | None:
        verdict = self.run("PostToolUse", tool_name, tool_input=arguments, tool_response=result)
        notes = [*([verdict.block] if verdict.block else []), *verdict.context]
        if not notes:
            return None
        return result + "\n\n" + "\n".join(f"[PostToolUse hook] {note}" for note in notes)

    def post_tool_failure(
        self, tool_name: str, result: str, is_error: bool = False, arguments: Any = None, **_: Any
    ) -> None:
        if is_error:
            self.run("PostToolUseFailure", tool_name, tool_input=arguments, error=result)

    def permission_request(
        self, tool_name: str, arguments: dict[str, Any], reason: str = "", **_: Any
    ) -> dict[str, Any] | None:
        verdict = self.run("PermissionRequest", tool_name, tool_input=arguments, reason=reason)
        if verdict.block is not None:
            return {"deny": verdict.block}
        return {"allow": True} if verdict.allow else None

    def user_prompt_submit(self, prompt: str, session_id: str = "", **_: Any) -> dict[str, Any]:
        self.session_id = session_id or self.session_id
        context: list[str] = []
        if self.session_id not in self._started:
            self._started.add(self.session_id)
            context += self.run("SessionStart", source="startup").context
        verdict = self.run("UserPromptSubmit", prompt=prompt)
        if verdict.block is not None:
            return {"block": verdict.block}
        context += verdict.context
        return {"context": "\n\n".join(context)} if context else {}

    def pre_compact(self, trigger: str = "auto", **_: Any) -> None:
        self.run("PreCompact", trigger=trigger, custom_instructions="")

    def stop(self, final_response: str = "", stop_hook_active: bool = False, **_: Any) -> Any:
        return self._stop("Stop", final_response, stop_hook_active)

    def subagent_stop(
        self, final_response: str = "", stop_hook_active: bool = False, **_: Any
    ) -> Any:
        return self._stop("SubagentStop", final_response, stop_hook_active)

    def _stop(self, event: str, final_response: str, active: bool) -> dict[str, Any] | None:
        verdict = self.run(event, stop_hook_active=active, last_assistant_message=final_response)
        return {"block": verdict.block} if verdict.block is not None else None

    def session_end(self, session_id: str = "", **_: Any) -> None:
        self.run("SessionEnd", session_id=session_id, reason="other")


def _decide(verdict: Verdict, data: dict[str, Any]) -> None:
    """Claude Code's JSON output: top-level `decision`/`reason` and `continue`, and the
    event's `hookSpecificOutput`."""
    specific = data.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    reason = str(data.get("reason") or specific.get("permissionDecisionReason") or "")
    if data.get("continue") is False:
        verdict.block = str(data.get("stopReason") or reason or "a hook stopped it")
    decision = data.get("decision")
    permission = specific.get("permissionDecision")
    behaviour = specific.get("decision")
    if isinstance(behaviour, dict):  # PermissionRequest: {"behavior": "allow"|"deny"}
        permission = behaviour.get("behavior")
        reason = str(behaviour.get("message") or reason)
        if isinstance(behaviour.get("updatedInput"), dict):
            verdict.updated_input = behaviour["updatedInput"]
    if decision == "block" or permission == "deny":
        verdict.block = verdict.block or reason or "blocked by a hook"
    elif permission == "ask":
        verdict.ask = reason or "a hook asks for the user's approval"
    elif decision == "approve" or permission == "allow":
        verdict.allow = True
    if isinstance(specific.get("updatedInput"), dict):
        verdict.updated_input = specific["updatedInput"]
    context = specific.get("additionalContext")
    if isinstance(context, str) and context.strip():
        verdict.context.append(context.strip())


def describe(hooks: HookSet) -> list[str]:
    """One line per configured hook, for `talaria hooks list`."""
    lines = []
    for event, groups in hooks.events.items():
        for group in groups:
            for handler in group.handlers:
                matcher = f" [{group.matcher}]" if group.matcher else ""
                what = json.dumps(handler.target) if handler.kind == "command" else handler.target
                lines.append(
                    f"{event}{matcher}  {handler.kind} {what}  "
                    f"(timeout {handler.timeout:g} s, {handler.source})"
                )
    return lines
