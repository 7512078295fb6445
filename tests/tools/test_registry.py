"""The registry: names, stable order, toolset selection, availability and conversion."""

from __future__ import annotations

import json

import pytest

from talaria import Tool, tool
from talaria.tools.registry import ToolRegistry, as_tool


def _tool(name: str, toolset: str = "custom", available: bool = True) -> Tool:
    return Tool(
        name=name,
        description=f"{name} tool",
        parameters={"type": "object", "properties": {}},
        handler=lambda: name,
        toolset=toolset,
        check=lambda: available,
    )


def _broken_check() -> bool:
    raise RuntimeError("probe failed")


def test_register_get_names_and_duplicates() -> None:
    registry = ToolRegistry([_tool("read_file", "file"), _tool("terminal", "terminal")])
    assert registry.names() == ["read_file", "terminal"]
    assert registry.get("terminal") is not None and registry.get("nope") is None
    assert "read_file" in registry and len(registry) == 2
    with pytest.raises(ValueError, match="already registered"):
        registry.register(_tool("read_file"))


def test_replace_keeps_the_original_position() -> None:
    registry = ToolRegistry([_tool("a"), _tool("b"), _tool("c")])
    newer = _tool("b", "other")
    registry.register(newer, replace=True)
    assert registry.names() == ["a", "b", "c"]
    assert registry.get("b") is newer


def test_order_is_registration_order_and_schemas_are_byte_stable() -> None:
    names = ["zeta", "alpha", "mid", "beta"]
    first = ToolRegistry([_tool(n) for n in names])
    second = ToolRegistry([_tool(n) for n in names])
    assert [t.name for t in first.select()] == names
    dumped = json.dumps(first.schemas(first.select()))
    assert dumped == json.dumps(second.schemas(second.select()))
    assert dumped == json.dumps(first.schemas(first.select()))


def test_select_by_toolset_with_extras_and_availability() -> None:
    registry = ToolRegistry(
        [
            _tool("terminal", "terminal"),
            _tool("read_file", "file"),
            _tool("browser", "web", available=False),
            _tool("write_file", "file"),
            _tool("memory", "memory"),
        ]
    )
    assert [t.name for t in registry.select(["file", "web"])] == ["read_file", "write_file"]
    assert [t.name for t in registry.select(None)] == [
        "terminal",
        "read_file",
        "write_file",
        "memory",
    ]
    assert registry.select([]) == []
    assert registry.toolsets() == ["terminal", "file", "web", "memory"]

    @tool
    def lookup(term: str) -> str:
        """Look a term up."""
        return term

    chosen = registry.select(["terminal"], extra=[lookup, _tool("down", available=False)])
    assert [t.name for t in chosen] == ["terminal", "lookup"]


def test_failing_check_hides_the_tool() -> None:
    broken = _tool("flaky")
    broken.check = _broken_check
    assert [t.name for t in ToolRegistry([broken, _tool("ok")]).select()] == ["ok"]


def test_extra_tool_overrides_a_registered_one_and_duplicates_are_refused() -> None:
    registry = ToolRegistry([_tool("terminal", "terminal"), _tool("read_file", "file")])
    mine = _tool("read_file")
    chosen = registry.select(None, extra=[mine])
    assert [t.name for t in chosen] == ["terminal", "read_file"]
    assert chosen[1] is mine
    with pytest.raises(ValueError, match="two tools are named 'x'"):
        registry.select(None, extra=[_tool("x"), _tool("x")])


def test_as_tool_accepts_decorated_tools_and_plain_functions() -> None:
    @tool
    def decorated(a: int) -> int:
        return a

    def plain(path: str, limit: int = 5) -> str:
        """Read a file."""
        return path

    assert as_tool(decorated) is decorated
    converted = as_tool(plain)
    assert converted.name == "plain" and converted.description == "Read a file."
    assert converted.parameters["required"] == ["path"]
    assert converted.handler("p") == "p"
    with pytest.raises(TypeError, match="not a tool"):
        as_tool("terminal")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid tool name"):
        as_tool(_tool("bad name"))


def test_registering_a_plain_function() -> None:
    def ping(host: str) -> str:
        return host

    registry = ToolRegistry()
    registered = registry.register(ping)
    assert registry.get("ping") is registered
    assert registered.schema()["function"]["parameters"]["properties"] == {
        "host": {"type": "string"}
    }
