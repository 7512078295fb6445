"""Chooses the prompt profile on the first turn, once the served context window is known.

The lean profile drops the built-in tools outside the core set (from the executor too: the
model is not offered them, so a call to one is an unknown tool) and shortens the schemas.
It is decided before the session's system prompt is built, so the prefix stays stable. A
loopback endpoint given without a provider is probed then too, to learn which local server
answers there.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from talaria.loop.runtime import Runtime
from talaria.prompt.profile import LEAN_TOOLS, choose_profile, lean_schema

log = logging.getLogger("talaria.prompt")


async def ensure_profile(rt: Runtime, user_tools: Collection[str]) -> str:
    """ "lean" or "full" for this runtime (chosen once; `user_tools` are always kept)."""
    if rt.profile is not None:
        return rt.profile
    setting = str(rt.config.prompt.profile)
    window = await _window(rt) if setting == "auto" else None
    await _recognise_local_server(rt)  # after the window probe, whose answers often tell
    rt.profile = choose_profile(setting, window, int(rt.config.prompt.lean_below))
    if rt.profile == "lean":
        for name in [n for n in rt.tools if n not in LEAN_TOOLS and n not in user_tools]:
            del rt.tools[name]
        rt.tool_schemas = [lean_schema(tool.schema()) for tool in rt.tools.values()]
        log.info("lean prompt profile (window %s): tools %s", window, ", ".join(rt.tools))
    return rt.profile


async def _window(rt: Runtime) -> int | None:
    configured = rt.config.model.context_length
    if configured:
        return int(configured)
    if rt.context is None:
        return None
    window = await rt.context.window(rt, interruptible=False)
    return int(window) if window else None


async def _recognise_local_server(rt: Runtime) -> None:
    """Ask a loopback endpoint given without a provider which local server it is (once per
    process, and not again after the window probe asked it): such a server's calls cost
    nothing (`context_windows.served_by`)."""
    spec = rt.caller.chain.active.spec
    if spec is None or spec.provider != "custom":
        return
    from talaria.providers.profiles.context_windows import recognise_local_server

    await recognise_local_server(spec.base_url, spec.api_key, spec.api_mode)
