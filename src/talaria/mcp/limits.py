"""What one MCP server may put in front of the model.

Every tool's name, description and input schema goes out with every request, so a server that
lists 10,000 tools, or one tool with a 220 KB description, costs megabytes per request (and
hosted APIs refuse more than 128 tools outright). Per server, at most `max_tools` tools are
offered (the first the server lists, after `tools: {include, exclude}`), a tool whose input
schema is over `max_schema_chars` as JSON is left out, and descriptions are cut to
`max_description_chars`. What was left out or cut is said in notices.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from talaria.mcp.config import ServerConfig

_NAMED = 20
"""Names listed in a notice; the rest are counted."""
CUT_MARK = " [description cut]"


@dataclass(frozen=True)
class Offer:
    """A server's tools as offered: the kept ones and what the caps did."""

    tools: tuple[Any, ...]
    left_out: tuple[str, ...] = ()
    """Tools past `max_tools`."""
    oversized: tuple[str, ...] = ()
    """Tools whose input schema is over `max_schema_chars`."""
    cut: tuple[str, ...] = ()
    """Tools whose description is cut to `max_description_chars`."""

    def notices(self, config: ServerConfig) -> list[str]:
        where, server = f"mcp_servers.{config.name}", f"MCP server {config.name!r}"
        notes = []
        if self.left_out:
            notes.append(
                f"{server} lists more than {config.max_tools} tools: "
                f"{len(self.left_out)} are left out ({where}.max_tools): {_names(self.left_out)}"
            )
        if self.oversized:
            notes.append(
                f"{server}: {len(self.oversized)} tool(s) left out, their input schema is over "
                f"{config.max_schema_chars} characters ({where}.max_schema_chars): "
                f"{_names(self.oversized)}"
            )
        if self.cut:
            notes.append(
                f"{server}: {len(self.cut)} tool description(s) cut to "
                f"{config.max_description_chars} characters ({where}.max_description_chars): "
                f"{_names(self.cut)}"
            )
        return notes


def _names(names: tuple[str, ...]) -> str:
    shown = ", ".join(names[:_NAMED])
    return shown if len(names) <= _NAMED else f"{shown} and {len(names) - _NAMED} more"


def description_text(remote: Any) -> str:
    return str(remote.description or remote.title or remote.name).strip()


def cut_description(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - len(CUT_MARK))] + CUT_MARK


def offer(config: ServerConfig, remote_tools: Iterable[Any]) -> Offer:
    """The tools of one server that may be offered, in the order it listed them."""
    fitting: list[Any] = []
    oversized: list[Any] = []
    for tool in remote_tools:
        if config.offers(tool.name):
            too_big = _schema_chars(tool) > config.max_schema_chars
            (oversized if too_big else fitting).append(tool)
    kept, left_out = fitting[: config.max_tools], fitting[config.max_tools :]
    cut = [t for t in kept if len(description_text(t)) > config.max_description_chars]
    return Offer(
        tools=tuple(kept),
        left_out=tuple(t.name for t in left_out),
        oversized=tuple(t.name for t in oversized),
        cut=tuple(t.name for t in cut),
    )


def _schema_chars(tool: Any) -> int:
    try:
        return len(json.dumps(tool.input_schema, separators=(",", ":"), default=str))
    except (TypeError, ValueError, RecursionError):
        return 1 << 62  # cannot be written as JSON: never offered
