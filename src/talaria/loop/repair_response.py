"""Answers that arrived but cannot be used as they are: empty, reasoning only, cut off, refused.

The caller gets *a* response; this module makes sure the loop gets a *usable* one. An empty or
reasoning-only reply is asked again once with a note (in the API copy only), then the next
provider is tried, then the turn fails with the reason (never a placeholder posing as the
answer). Text cut off by the output limit is continued and joined into one answer while the
continuations make progress. Tool calls cut off by the output limit are never run: the call is
retried once, with twice the output room but never more than the window (doubling without end
kept a small model that repeats itself generating for minutes). A refusal ends the turn at once.
Where the model's profile says so (custom and local endpoints), an answer that is a tool call
written as text is read as that call (`loop.text_tool_calls`), with a notice; in an answer the
output limit cut off, the calls whose text closed run and the cut-off rest is dropped (a 0.5B
model wrote the right call, then copies of it until the limit, and was asked again for all).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from enum import Enum
from typing import TYPE_CHECKING

from talaria.core import (
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    StreamHandler,
    ToolCall,
    Usage,
)
from talaria.events import Notice
from talaria.interrupt import InterruptSignal
from talaria.providers.errors import ErrorKind, ProviderError
from talaria.providers.profiles import profile_of
from talaria.providers.resilience.caller import CallResult, ModelCaller
from talaria.providers.resilience.retry import Action, action_for

if TYPE_CHECKING:
    from talaria.loop.held_text import HeldText

MAX_CONTINUATIONS = 3
MAX_TRUNCATION_RETRIES = 1

EMPTY_NOTE = (
    "[Your last reply was empty. Answer the user's request now, or call a tool if something "
    "is left to do.]"
)
"""Qwen2.5-Coder 1.5B on llama.cpp, done after its tool calls, replied empty; told "no text and
no tool call... continue from where you are", it answered that it had no previous reply to
continue from; told this, it answered with what the tools had found."""
CONTINUE_NOTE = (
    "[Your answer above was cut off by the output limit. Continue exactly where it stopped, "
    "without repeating anything.]"
)
TRUNCATED_NOTE = (
    "[Your previous tool call was cut off by the output limit, so it was not run. Make the call "
    "again with shorter arguments (for example, write a large file in several steps).]"
)

RequestBuilder = Callable[[list[str]], ModelRequest]
"""Builds the request for the current history with extra ephemeral notes in its newest message."""


class Verdict(Enum):
    USABLE = "usable"
    EMPTY = "empty"
    REASONING_ONLY = "reasoning_only"
    CUT_OFF = "cut_off"  # text stopped by the output limit: continue it
    TRUNCATED_CALLS = "truncated_calls"  # tool calls stopped by the output limit: never run
    REFUSAL = "refusal"


def inspect_response(response: ModelResponse) -> Verdict:
    """What a complete response is, as far as the loop is concerned."""
    has_text = bool(response.text and response.text.strip())
    if response.finish_reason == "refusal" or (
        response.finish_reason == "content_filter" and not has_text and not response.tool_calls
    ):
        return Verdict.REFUSAL
    if response.finish_reason == "length" and response.tool_calls:
        # Anthropic reports a cut-off tool input as a parsed (partial) object, so parseable
        # arguments prove nothing: a call the output limit stopped is never run.
        return Verdict.TRUNCATED_CALLS
    if response.finish_reason == "length" and has_text:
        return Verdict.CUT_OFF
    if has_text or response.tool_calls:
        return Verdict.USABLE
    return Verdict.REASONING_ONLY if response.reasoning else Verdict.EMPTY


async def obtain_response(
    caller: ModelCaller,
    build: RequestBuilder,
    stream: StreamHandler,
    interrupt: InterruptSignal,
    *,
    text_calls: bool = False,
    window: int | None = None,
) -> CallResult:
    """A usable response for the current history, or a `ProviderError` saying why not.
    `text_calls`: read tool calls written as text (on custom and local endpoints); `window`:
    the most output room a retried cut-off call may get."""
    repair = _Repair(caller, build, stream, interrupt)
    repair.text_calls = text_calls
    repair.window = window
    return await repair.run()


class _Repair:
    def __init__(
        self,
        caller: ModelCaller,
        build: RequestBuilder,
        stream: StreamHandler,
        interrupt: InterruptSignal,
    ) -> None:
        self.caller = caller
        self.build = build
        self.stream = stream
        self.interrupt = interrupt
        self.request = build([])
        self.first_attempt = caller.turn_attempts
        self.errors: list[ProviderError] = []
        self.usage = Usage()
        self.parts: list[str] = []
        """Texts cut off by the output limit, in order; the final answer is their join."""
        self.reasoning: list[str] = []
        self.nudged = False
        self.truncations = 0
        self.max_tokens = self.request.max_tokens
        self.text_calls = False
        self.window: int | None = None

    async def run(self) -> CallResult:
        while True:
            result = await self._call()
            if result is None:
                self._empty(Verdict.EMPTY)
                continue
            response = result.response
            if response.reasoning:
                self.reasoning.append(response.reasoning)
            verdict = inspect_response(response)
            if verdict is Verdict.REFUSAL:
                raise self._refusal(result)
            if verdict is Verdict.USABLE:
                return self._final(result, result.response.text)
            if verdict is Verdict.CUT_OFF:
                if not self._continue(response):
                    return self._final(result, None)
            elif self.parts:
                # A continuation that adds nothing usable ends the answer with what there is.
                return self._final(result, response.text, keep_calls=False)
            elif verdict is Verdict.TRUNCATED_CALLS:
                self._retry_truncated(result)
            else:
                self._empty(verdict)

    async def _call(self) -> CallResult | None:
        """One call through the caller, with a tool call written as text read as that call;
        None when the adapter reported an empty answer."""
        held: HeldText | None = None
        if self.text_calls and not self.parts:
            from talaria.loop.held_text import held_for

            held = held_for(self.stream, self.request, self.caller.chain.active.profile, True)
        try:
            result = await self.caller.call(self.request, held or self.stream, self.interrupt)
        except ProviderError as error:
            if held is not None:
                held.drop()  # a broken-off attempt: what it held is not an answer
            if action_for(error.kind) is not Action.NUDGE:
                raise
            self.errors.append(error)
            return None
        self.errors.extend(result.errors)
        self.usage.add(result.response.usage)
        if held is None:
            return result
        read = self._read_text_calls(result)
        if read is result:
            held.release(result.response.text)
        else:
            held.drop(read.response.text)
        return read

    def _final(
        self, result: CallResult, text: str | None, *, keep_calls: bool = True
    ) -> CallResult:
        response = result.response
        joined = "".join(self.parts) + (text or "")
        final = replace(
            response,
            text=joined or None,
            tool_calls=response.tool_calls if keep_calls else [],
            reasoning="\n\n".join(self.reasoning) or None,
        )
        attempts = self.caller.turn_attempts - self.first_attempt
        return CallResult(final, result.client, attempts, self.errors, self.usage)

    def _read_text_calls(self, result: CallResult) -> CallResult:
        """The response with a tool call the model wrote as text turned into that call."""
        response = result.response
        if response.tool_calls or not profile_of(result.client).text_tool_calls:
            return result
        from talaria.loop.text_tool_calls import find_text_tool_calls

        offered = [tool["function"]["name"] for tool in self.request.tools]
        cut_off = response.finish_reason == "length"
        found = find_text_tool_calls(response.text or "", offered, cut_off=cut_off)
        if found is None:
            return result
        names = ", ".join(call.name for call in found.calls)
        self.caller.emit(Notice("info", f"read a tool call the model wrote as text: {names}"))
        calls = [ToolCall(c.id, c.name, c.arguments) for c in found.calls]
        # Calls that closed before the cut are whole: they run, the cut-off rest is dropped.
        finish = "tool_calls" if cut_off and found.closed else response.finish_reason
        changed = replace(response, text=found.text or None, tool_calls=calls, finish_reason=finish)
        return CallResult(changed, result.client, result.attempts, result.errors, result.usage)

    def _continue(self, response: ModelResponse) -> bool:
        """Ask for the rest of a cut-off answer; False when it is time to stop continuing."""
        text = response.text or ""
        if self.parts and text == self.parts[-1]:
            return False
        self.parts.append(text)
        if len(self.parts) > MAX_CONTINUATIONS:
            self.caller.emit(
                Notice(
                    "warning",
                    f"the answer is still cut off by the output limit "
                    f"after {MAX_CONTINUATIONS} continuations",
                )
            )
            return False
        base = self.build([])
        so_far: AssistantMessage = {"role": "assistant", "content": "".join(self.parts)}
        self.request = replace(
            base, messages=[*base.messages, so_far, {"role": "user", "content": CONTINUE_NOTE}]
        )
        return True

    def _retry_truncated(self, result: CallResult) -> None:
        self.truncations += 1
        if self.truncations > MAX_TRUNCATION_RETRIES:
            if not self.caller.fall_back("tool call cut off by the output limit"):
                raise ProviderError(
                    f"the model's tool call was cut off by the output limit "
                    f"{self.truncations} times and was not run; raise model.max_tokens",
                    kind=ErrorKind.TRUNCATED,
                    provider=result.client.provider,
                    model=result.client.model,
                )
            self.truncations = 0
        elif self.max_tokens is not None:
            doubled = self.max_tokens * 2
            self.max_tokens = max(self.max_tokens, min(doubled, self.window or doubled))
        names = ", ".join(call.name for call in result.response.tool_calls)
        grown = f" with max_tokens {self.max_tokens}" if self.max_tokens is not None else ""
        self.caller.emit(
            Notice(
                "warning",
                f"tool call ({names}) cut off by the output limit; not run; asking again{grown}",
            )
        )
        self.request = replace(self.build([TRUNCATED_NOTE]), max_tokens=self.max_tokens)

    def _empty(self, verdict: Verdict) -> None:
        """Nudge once, then fall back, then fail with the reason."""
        if not self.nudged:
            self.nudged = True
            self.request = self.build([EMPTY_NOTE])
            return
        if self.caller.fall_back("empty reply"):
            self.nudged = False
            self.request = self.build([])
            return
        entry = self.caller.chain.active
        what = "only reasoning" if verdict is Verdict.REASONING_ONLY else "an empty reply"
        raise ProviderError(
            f"the model returned {what} (no text, no tool call), also when asked again",
            kind=ErrorKind.EMPTY_RESPONSE,
            provider=entry.provider,
            model=entry.model,
        )

    def _refusal(self, result: CallResult) -> ProviderError:
        response = result.response
        reason = response.refusal or response.text or "the model refused to answer"
        return ProviderError(
            reason,
            kind=ErrorKind.REFUSAL,
            provider=result.client.provider,
            model=result.client.model,
        )
