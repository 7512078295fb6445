"""Token estimates good enough to decide when to compress, without a tokenizer.

Tokenizers differ per model and cost milliseconds per call; the loop needs a cheap number
every step. So: count characters by script (Latin text runs ~4 characters per token, CJK,
Hangul and Kana ~1 token per character, other scripts ~2 characters per token), and anchor
the estimate to the provider's real usage whenever one is known (`ContextTracker`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

MESSAGE_OVERHEAD = 4
"""Role markers and separators each message costs on the wire."""
TOOL_CALL_OVERHEAD = 4
IMAGE_TOKENS = 1000
_IMAGE_PARTS = frozenset({"image_url", "image", "input_image"})


@functools.cache
def _scripts() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(not Latin, wide): compiled for the first non-ASCII text, not at import (their Unicode
    ranges take milliseconds to compile).

    Not Latin: runs outside ASCII, Latin-1, Latin Extended A/B and Additional, general
    punctuation. Wide: Hangul Jamo, CJK radicals to unified ideographs (with Kana, Bopomofo),
    Hangul syllables, CJK compatibility forms, full-width forms, emoji, supplementary
    ideographs: ~1 token each."""
    not_latin = re.compile(r"[^\u0000-\u024f\u1e00-\u1eff\u2000-\u206f]+")
    wide = re.compile(
        r"[\u1100-\u11ff\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f"
        r"\uff00-\uffef\U0001f000-\U0001faff\U00020000-\U0003ffff]+"
    )
    return not_latin, wide


def estimate_text_tokens(text: str) -> int:
    """Roughly how many tokens `text` costs, by script."""
    if text.isascii():
        return (len(text) + 3) // 4
    not_latin_runs, wide_runs = _scripts()
    not_latin = sum(map(len, not_latin_runs.findall(text)))
    wide = sum(map(len, wide_runs.findall(text)))
    latin = len(text) - not_latin
    other = not_latin - wide
    return (latin + 3) // 4 + wide + (other + 1) // 2


def _part_tokens(part: Any) -> int:
    if not isinstance(part, Mapping):
        return estimate_text_tokens(str(part))
    kind = part.get("type")
    if kind == "text":
        text = part.get("text")
        return estimate_text_tokens(text) if isinstance(text, str) else 0
    if kind in _IMAGE_PARTS:
        return IMAGE_TOKENS
    return estimate_text_tokens(json.dumps(part, default=str))


def _content_tokens(content: Any) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return estimate_text_tokens(content)
    if isinstance(content, list):
        return sum(_part_tokens(part) for part in content)
    return estimate_text_tokens(str(content))


def _call_tokens(call: Any) -> int:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping):
        return TOOL_CALL_OVERHEAD
    name = function.get("name")
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, default=str)
    return (
        TOOL_CALL_OVERHEAD
        + estimate_text_tokens(name if isinstance(name, str) else "")
        + estimate_text_tokens(arguments)
    )


def estimate_message_tokens(message: Mapping[str, Any]) -> int:
    """Content, tool call names and arguments, and a small per-message overhead."""
    tokens = MESSAGE_OVERHEAD + _content_tokens(message.get("content"))
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        tokens += sum(_call_tokens(call) for call in calls)
    return tokens


def estimate_tokens(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None
) -> int:
    """The whole request: every message plus the tool schemas (OpenAI function-tool dicts)."""
    total = sum(estimate_message_tokens(message) for message in messages)
    if tools:
        total += estimate_text_tokens(json.dumps(list(tools), default=str))
    return total


class ContextTracker:
    """Context size anchored to what the provider last reported.

    The provider's prompt token count is exact for the messages it saw; only the messages
    appended since need estimating, so the error stays small however long the session grows.
    `message_count` is the length of the message list the caller will pass to `estimate`
    (the same list shape, system message included, as the one sent).
    """

    def __init__(self) -> None:
        self._anchor_tokens: int | None = None
        self._anchor_count = 0

    def record_usage(self, prompt_tokens: int, message_count: int) -> None:
        """The model saw `prompt_tokens` for the first `message_count` messages."""
        if prompt_tokens <= 0:
            return
        self._anchor_tokens = prompt_tokens
        self._anchor_count = message_count

    def reset(self) -> None:
        """Forget the anchor: the history was rewritten (compression, a new system prompt)."""
        self._anchor_tokens = None
        self._anchor_count = 0

    def estimate(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> int:
        """Anchor plus the messages added since; a full estimate without a usable anchor."""
        if self._anchor_tokens is None or len(messages) < self._anchor_count:
            return estimate_tokens(messages, tools)
        added = messages[self._anchor_count :]
        return self._anchor_tokens + sum(estimate_message_tokens(m) for m in added)
