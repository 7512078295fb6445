"""talaria: a Python agent runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from talaria.agent import Agent, TurnFailed
    from talaria.config_schema import ConfigError
    from talaria.core.result import TurnResult
    from talaria.tools.base import Tool, ToolContext, ToolError
    from talaria.tools.decorator import tool

    AIAgent = Agent

_EXPORTS = {
    "Agent": ("talaria.agent", "Agent"),
    "AIAgent": ("talaria.agent", "Agent"),
    "ConfigError": ("talaria.config_schema", "ConfigError"),
    "tool": ("talaria.tools.decorator", "tool"),
    "Tool": ("talaria.tools.base", "Tool"),
    "ToolContext": ("talaria.tools.base", "ToolContext"),
    "ToolError": ("talaria.tools.base", "ToolError"),
    "TurnFailed": ("talaria.agent", "TurnFailed"),
    "TurnResult": ("talaria.core.result", "TurnResult"),
}

__all__ = [
    "AIAgent",
    "Agent",
    "ConfigError",
    "Tool",
    "ToolContext",
    "ToolError",
    "TurnFailed",
    "TurnResult",
    "__version__",
    "tool",
]


def __getattr__(name: str) -> Any:
    """Import lazily so that `import talaria` stays fast (the SDKs load on first model call)."""
    try:
        module_name, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'talaria' has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(module_name), attribute)
    globals()[name] = value
    return value
