"""The output limit sent with each model call when ``model.max_tokens`` is not set.

A local server generates until its context window is full unless told otherwise, and a small
model that starts repeating itself kept one request busy for eleven minutes (issue 27). Where
the profile says so (local and custom servers), a quarter of the served window, at most
`DEFAULT_CAP` tokens, is sent instead: room for any answer or file a step writes, and an end
to a runaway generation. Anthropic Messages always sends its own default; reasoning models
are left alone, since their limit also counts the reasoning. The window is
``model.context_length`` or the context engine's (which asks a local server what it serves);
a durable workflow has it from its worker's settings and reads no file or endpoint itself.
"""

from __future__ import annotations

from talaria.loop.runtime import Runtime

DEFAULT_CAP = 8192
WINDOW_SHARE = 4
"""The limit is the window divided by this (then capped)."""


async def output_limit(rt: Runtime) -> int | None:
    """``model.max_tokens`` when set, else the window-derived default where it applies."""
    configured = rt.config.model.max_tokens
    if configured:
        return int(configured)
    entry = rt.caller.chain.active
    profile = entry.profile
    reasoning = profile.encrypted_reasoning or not profile.supports_temperature
    if not profile.output_limit_from_window or profile.output_limit_default or reasoning:
        return None
    window = await served_window(rt)
    if not window:
        return None  # nothing known to derive it from (compression off, no context_length)
    return max(1, min(window // WINDOW_SHARE, DEFAULT_CAP))


async def served_window(rt: Runtime) -> int | None:
    """``model.context_length``, else the context engine's window; None when neither knows."""
    window = rt.config.model.context_length
    if not window and rt.context is not None:
        window = await rt.context.window(rt)
    return int(window) if window else None
