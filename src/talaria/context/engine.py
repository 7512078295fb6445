"""The pluggable context engine: what happens when the history nears the model's window.

`context.engine` in the config picks it: "default" (the lossy compressor), "none", or
"package.module:ClassName" for your own subclass of `ContextEngine`.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from talaria.config_schema import ConfigError

if TYPE_CHECKING:
    from talaria.config import Config
    from talaria.core import Usage
    from talaria.loop.runtime import Runtime
    from talaria.loop.session import SessionHandle

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

    async def fill(self, rt: Runtime, session: SessionHandle) -> float | None:
        """The share of the window the session's context takes now (None: unknown); what a
        front end checks between turns (the gateway compresses past `gateway.compress_at`)."""
        return None

    async def window(self, rt: Runtime, *, interruptible: bool = True) -> int | None:
        """The context window it works against, in tokens (None: unknown). Not interruptible
        before a turn starts: the lookup is short, and an interrupt then ends the turn."""
        return None


def load_context_engine(config: Config, runtime: Runtime) -> ContextEngine | None:
    if not config.compression.enabled:
        return None
    name = str(config.context.engine)
    if name == "none":
        return None
    engine = _engine_class(ENGINES.get(name, name))(config, runtime)
    if not isinstance(engine, ContextEngine):
        raise ConfigError(f"context.engine {name!r} is not a talaria.context.engine.ContextEngine")
    return engine


def _engine_class(target: str) -> Any:
    """The class `module:Class` names; a `ConfigError` when there is none."""
    module_name, _, class_name = target.partition(":")
    if not class_name:
        raise ConfigError(
            f"context.engine must be 'default', 'none' or 'module:Class', got {target!r}"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"context.engine {target!r}: cannot import {module_name} ({exc}); "
            "fix context.engine in config.yaml (or set it to 'default')"
        ) from None
    found = getattr(module, class_name, None)
    if not isinstance(found, type):
        raise ConfigError(
            f"context.engine {target!r}: {module_name} has no class {class_name}; "
            "fix context.engine in config.yaml (or set it to 'default')"
        )
    return found
