"""Streamed text that may be a tool call written as text is held back until the answer ends.

Where the loop reads tool calls from text (`loop.text_tool_calls`), the raw JSON of such a
call must not reach the screen as if it were the answer. Text streams on as usual up to the
first place a call could start (a brace, a fence, a ``<tool_call>`` tag); from there it is held
while it still could be a call, and let go as soon as it clearly is not (a code block, a
brace in prose); line breaks and spaces wait with it, since the stored step text ends
without them when a call follows. When the answer ends, the caller either drops what is held
(it was a call; the prose the step keeps around it still shows, so the screen reads as the
final answer does) or releases it.
"""

from __future__ import annotations

from talaria.core import ModelRequest, ModelResponse, StreamHandler
from talaria.loop.text_tool_calls import CALL_KEYS, find_text_tool_calls
from talaria.providers.profiles import ModelProfile

_TAGS = ("<tool_call>", "<|python_tag|>", "[TOOL_CALLS]")
_FENCE = "```"
_LANGUAGE_ROOM = 40
"""Characters after a fence's backticks by which its first line must have ended."""


class HeldText:
    """A StreamHandler in front of `inner` that holds back what may be a call."""

    def __init__(self, inner: StreamHandler) -> None:
        self.inner = inner
        self.pending = ""
        """Text received and not yet passed on."""
        self.passed = ""
        """Text passed on so far."""
        self.holding = False
        """True once the pending text starts like a call: everything after it waits."""

    def text(self, delta: str) -> None:
        self.pending += delta
        if not self.holding:
            self._advance()

    def reasoning(self, delta: str) -> None:
        self.inner.reasoning(delta)

    def tool_call(self, index: int, call_id: str, name: str) -> None:
        self.inner.tool_call(index, call_id, name)

    def tool_arguments(self, index: int, delta: str) -> None:
        self.inner.tool_arguments(index, delta)

    def drop(self, kept: str | None = None) -> None:
        """The held text was a call: it never reaches the screen. `kept` is the answer's
        text without its calls (the prose around them, as the step stores it): what of it
        follows on from the text passed so far is passed, so the screen shows what is kept."""
        rest = kept[len(self.passed) :] if kept and kept.startswith(self.passed) else ""
        self.pending = ""
        self.holding = False
        self._pass(rest)

    def release(self, final_text: str | None) -> None:
        """The answer was not a call: pass on the rest of `final_text` (the whole answer as
        the response has it), or what is held when the streamed text is not its start (an
        attempt that broke off and was retried). Nothing when no text came through here (a
        durable workflow, whose worker streams the text)."""
        if not self.passed and not self.pending:
            return
        final = final_text or ""
        rest = final[len(self.passed) :] if final.startswith(self.passed) else self.pending
        self.pending = ""
        self.holding = False
        self._pass(rest)

    def _pass(self, text: str) -> None:
        if text:
            self.passed += text
            self.inner.text(text)

    def _advance(self) -> None:
        while True:
            at = _next_start(self.pending)
            head = self.pending if at is None else self.pending[:at]
            shown = len(head.rstrip())  # trailing whitespace waits: a call may follow it,
            self._pass(head[:shown])  # and the stored step text ends without it then
            self.pending = self.pending[shown:]
            if at is None:
                return
            start = at - shown
            verdict = could_be_call(self.pending[start:])
            if verdict is None:
                return
            if verdict:
                self.holding = True
                return
            self._pass(self.pending[: start + 1])
            self.pending = self.pending[start + 1 :]


def held_for(
    stream: StreamHandler, request: ModelRequest, profile: ModelProfile, enabled: bool
) -> HeldText | None:
    """A gate in front of `stream` where the answer's text may be read as tool calls (tools
    offered and allowed, a profile with `text_tool_calls`); None elsewhere."""
    if enabled and request.tools and request.tool_choice != "none" and profile.text_tool_calls:
        return HeldText(stream)
    return None


def settle(held: HeldText, request: ModelRequest, response: ModelResponse) -> None:
    """Drop what `held` holds when the answer spells tool calls, else let it go."""
    offered = [tool["function"]["name"] for tool in request.tools]
    found = None if response.tool_calls else find_text_tool_calls(response.text or "", offered)
    if found is None:
        held.release(response.text)
    else:
        held.drop(found.text)


def _next_start(text: str) -> int | None:
    """The first index where a call could start (a partial marker at the end counts)."""
    for index, char in enumerate(text):
        if char in "{<[":
            return index
        if char == "`" and (text.startswith(_FENCE, index) or _FENCE.startswith(text[index:])):
            return index
    return None


def could_be_call(text: str) -> bool | None:
    """Whether `text`, which starts where a call could, is the start of one: True (hold it),
    False (it is not), None (too little has arrived to say)."""
    if text.startswith(_FENCE):
        head, newline, body = text[len(_FENCE) :].partition("\n")
        if not newline:
            return None if len(head) <= _LANGUAGE_ROOM else False
        body = body.lstrip()
        return could_be_call(body) if body else None
    if text[0] == "`":
        return None  # a partial fence at the end
    if text[0] in "<[":
        for tag in _TAGS:
            if text.startswith(tag):
                return True
            if tag.startswith(text):
                return None
        if text[0] == "<":
            return False
        body = text[1:].lstrip()
        return (could_be_call(body) if body[0] == "{" else False) if body else None
    body = text[1:].lstrip()
    if not body:
        return None
    if body[0] not in "\"'":
        return False
    key, closed, _ = body[1:].partition(body[0])
    if closed:
        return key in CALL_KEYS
    return None if any(name.startswith(key) for name in CALL_KEYS) else False
