"""Steps 5-7 of a turn's lifecycle (docs/architecture.md): from the live history to the request a
provider receives.

The API copy is repaired (valid history; incrementally, by the session's `IncrementalRepair`) and
gets the volatile layers in its newest message only (stable prefix); the stored history is never
touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from talaria.core import Message, ModelRequest
from talaria.messages.incremental import IncrementalRepair
from talaria.messages.media import with_tool_images


def build_messages(
    system_prompt: str | None,
    history: list[Message],
    ephemeral: list[str],
    repair: IncrementalRepair | None = None,
) -> list[Message]:
    """System + repaired history, with ephemeral notes appended to the newest message.
    `repair` keeps the repaired copy between calls (a one-off repair without it)."""
    messages = (repair or IncrementalRepair()).messages(system_prompt, history)
    notes = [note for note in ephemeral if note]
    if notes and messages:
        messages = [*messages[:-1], _with_note(messages[-1], "\n\n".join(notes))]
    return messages


def _with_note(message: Message, note: str) -> Message:
    updated: dict[str, Any] = dict(message)
    content: Any = updated.get("content")
    if isinstance(content, list):
        updated["content"] = [*content, {"type": "text", "text": note}]
    elif content:
        updated["content"] = f"{content}\n\n{note}"
    elif updated.get("role") == "assistant":
        return message
    else:
        updated["content"] = note
    return cast(Message, updated)


def build_request(
    messages: list[Message],
    tools: list[dict[str, Any]],
    *,
    stream: bool,
    max_tokens: int | None,
    cache_ttl: str | None,
    tool_choice: str = "auto",
    media: Path | None = None,
) -> ModelRequest:
    """With `media` (the model takes images), the images tools saved there follow their
    results in the request (the stored history keeps their paths)."""
    return ModelRequest(
        messages=with_tool_images(messages, media) if media is not None else messages,
        tools=tools,
        stream=stream,
        max_tokens=max_tokens,
        cache_ttl=cache_ttl,
        tool_choice="none" if tool_choice == "none" else "auto",
    )
