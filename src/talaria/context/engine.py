"""The pluggable context engine: a history processor for when the history nears the window.

An engine gets the conversation (without the system prompt), a `Budget` (the window, the
threshold, the estimated size and why it is asked) and a `Summarise` callable that asks the
model, and returns the history the conversation continues with. It knows nothing of the
loop: the loop's driver (`talaria.loop.context`) looks up the window, keeps the estimate,
runs the `pre_compact` hooks, continues the session in a child and emits `SessionContinued`,
which the agent's tools' state and the background processes follow.

`context.engine` in the config picks it: "default" (the lossy compressor), "none", or
"package.module:ClassName" for your own subclass of `ContextEngine`, built with the `Config`.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from talaria.config_schema import ConfigError

if TYPE_CHECKING:
    from talaria.config import Config
    from talaria.core import Message

ENGINES = {"default": "talaria.context.compressor:Compressor"}

Trigger = Literal["size", "overflow", "manual"]
"""Why the engine is asked: the estimate passed the threshold, the provider refused the
request as too long, or the user asked (`/compress`, `Agent.compress`)."""

Summarise = Callable[["list[Message]"], Awaitable[str]]
"""Sends a request (system instructions and a user message) to the `compression` model and
returns its answer; "" when the model could not be had (the loop logs why)."""


@dataclass(frozen=True, slots=True)
class Budget:
    """The size of the outgoing context against the model's window, in tokens."""

    window: int
    threshold: float
    """The share of the window past which the history should shrink."""
    estimated: int
    """The whole request (system prompt, history, tool definitions), anchored to the
    provider's last real count."""
    trigger: Trigger = "size"
    focus: str | None = None
    """What the user asked a summary to focus on (`/compress <focus>`)."""
    keep: str = ""
    """Text the new history must still carry: the agent's task list, rendered."""

    @property
    def excess(self) -> int:
        """Tokens over the threshold (0 when under it)."""
        return max(int(self.estimated - self.threshold * self.window), 0)


class CompressionFailed(Exception):
    """The engine tried and could not shrink the history; the message is for the user. The
    loop does not ask again in the same turn."""


class ContextEngine:
    """Keeps the outgoing context inside the window. The loop calls `process` only when the
    history must shrink (over the threshold, refused as too long, or asked by the user); the
    history it returns continues in a child session (the parent keeps the full one)."""

    def __init__(self, config: Config) -> None:
        self.config = config

    async def process(
        self, history: list[Message], budget: Budget, summarise: Summarise
    ) -> list[Message]:
        """The history to continue with: `history` itself when nothing can be done yet,
        `CompressionFailed` when nothing can be done this turn."""
        raise NotImplementedError(f"{type(self).__name__} must define process()")

    def describe(self, before: list[Message], after: list[Message]) -> str:
        """What the user is told about a change `process` made."""
        return f"compressed {len(before)} messages into {len(after)}"


def engine_class(config: Config) -> type[ContextEngine] | None:
    """The class `context.engine` names (None: "none", or compression is off); a
    `ConfigError` when there is none."""
    if not config.compression.enabled:
        return None
    name = str(config.context.engine)
    if name == "none":
        return None
    found = _engine_class(ENGINES.get(name, name))
    if not issubclass(found, ContextEngine):
        raise ConfigError(f"context.engine {name!r} is not a talaria.context.engine.ContextEngine")
    return found


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
