"""The tools an agent knows, and the stable, ordered subset it offers the model.

Order is registration order, never a set's or a dict's whim: the tool definitions sit in the
prompt prefix, which must be byte-identical from one request to the next for prompt caching.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from talaria.tools.base import Tool
from talaria.tools.decorator import check_name, tool


def as_tool(obj: Tool | Callable[..., Any]) -> Tool:
    """A `Tool` as is (including `@tool` results); a plain typed function through `@tool`."""
    if isinstance(obj, Tool):
        check_name(obj.name)
        return obj
    if callable(obj):
        return tool(obj)
    raise TypeError(f"not a tool: {obj!r} (pass a @tool function, a Tool or a typed function)")


class ToolRegistry:
    """Tools by name, in registration order."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.register(item)

    def register(self, obj: Tool | Callable[..., Any], *, replace: bool = False) -> Tool:
        """Add a tool; a second tool with the same name is an error unless `replace=True`,
        in which case it takes the old one's place in the order."""
        new = as_tool(obj)
        if new.name in self._tools and not replace:
            raise ValueError(
                f"a tool named {new.name!r} is already registered (pass replace=True to swap it)"
            )
        self._tools[new.name] = new
        return new

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def toolsets(self) -> list[str]:
        """Toolset names in first-registration order, so callers can reject unknown ones."""
        return list(dict.fromkeys(t.toolset for t in self._tools.values()))

    def select(
        self,
        toolsets: Iterable[str] | None = None,
        extra: Iterable[Tool | Callable[..., Any]] = (),
    ) -> list[Tool]:
        """The tools to offer: registered ones in the given toolsets (all when None), then
        `extra`, dropping any whose availability check fails. An extra tool with the name of
        a registered one replaces it (the caller's tool wins); duplicate extras are an error.
        """
        extras: dict[str, Tool] = {}
        for item in extra:
            extra_tool = as_tool(item)
            if extra_tool.name in extras:
                raise ValueError(f"two tools are named {extra_tool.name!r}")
            extras[extra_tool.name] = extra_tool
        wanted = None if toolsets is None else set(toolsets)
        chosen = [
            t
            for t in self._tools.values()
            if (wanted is None or t.toolset in wanted) and t.name not in extras
        ]
        chosen.extend(extras.values())
        return [t for t in chosen if t.available()]

    @staticmethod
    def schemas(tools: Iterable[Tool]) -> list[dict[str, Any]]:
        """OpenAI function-tool schemas, in the order given."""
        return [t.schema() for t in tools]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)
