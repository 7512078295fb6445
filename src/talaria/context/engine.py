"""The pluggable context engine: what happens when the history nears the model's window.

`context.engine` in the config picks it: "default" (the lossy compressor), "none", or
"package.module:ClassName" for your own subclass of `ContextEngine`.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from talaria.config import Config
    from talaria.loop.runtime import Runtime
    from talaria.loop.session import SessionHandle
    from talaria.providers.base import Usage

ENGINES = {"default": "talaria.context.compressor:Compressor"}


class ContextEngine(ABC):
    """Keeps the outgoing context inside the window. Called by the loop around each request."""

    @abstractmethod
    async def before_request(self, rt: Runtime, session: SessionHandle, state: Any) -> None:
        """Compress (or otherwise shrink) the session's history if it is too large."""

    @abstractmethod
    def record_usage(self, usage: Usage, message_count: int) -> None:
        """The provider's real count for the context it just saw (anchors the estimate)."""

    async def compress(
        self, rt: Runtime, session: SessionHandle, state: Any, focus: str | None = None
    ) -> bool:
        """Compress now, whatever the size (`/compress`). False when nothing changed."""
        return False

    async def window(self, rt: Runtime, *, interruptible: bool = True) -> int | None:
        """The context window it works against, in tokens (None: unknown). Not interruptible
        before a turn starts: the lookup is short, and an interrupt then ends the turn."""
        return None


def load_context_engine(config: Config, runtime: Runtime) -> ContextEngine | None:
    if not config.get("compression.enabled", True):
        return None
    name = str(config.get("context.engine", "default"))
    if name == "none":
        return None
    target = ENGINES.get(name, name)
    module_name, _, class_name = target.partition(":")
    if not class_name:
        raise ValueError(
            f"context.engine must be 'default', 'none' or 'module:Class', got {name!r}"
        )
    engine_class = getattr(importlib.import_module(module_name), class_name)
    engine = engine_class(config, runtime)
    if not isinstance(engine, ContextEngine):
        raise TypeError(f"{target} is not a talaria.context.engine.ContextEngine")
    return engine
