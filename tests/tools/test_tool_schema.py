"""Schemas from signatures and docstrings, and what `@tool` gives back."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict

import pytest

from talaria import Tool, ToolContext, tool
from talaria.tools.decorator import FunctionTool
from talaria.tools.schema import function_schema, parse_docstring


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0
    label: Annotated[str, "shown next to the point"] = ""


class Filters(TypedDict):
    pattern: str
    depth: NotRequired[int]


def _params(fn: Any) -> dict[str, Any]:
    return function_schema(fn)[1]


def _obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def test_scalars_defaults_and_required() -> None:
    def f(name: str, count: int, ratio: float = 0.5, force: bool = False) -> str:
        return name

    assert _params(f) == _obj(
        {
            "name": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": "number", "default": 0.5},
            "force": {"type": "boolean", "default": False},
        },
        ["name", "count"],
    )


def test_optional_forms_are_nullable_and_only_required_without_default() -> None:
    def f(a: str | None, b: Optional[int] = None, c: list[str] | None = None) -> None:  # noqa: UP045
        return None

    assert _params(f) == _obj(
        {
            "a": {"type": ["string", "null"]},
            "b": {"type": ["integer", "null"], "default": None},
            "c": {"type": ["array", "null"], "items": {"type": "string"}, "default": None},
        },
        ["a"],
    )


def test_containers() -> None:
    def f(
        names: list[str],
        pair: tuple[int, str],
        many: tuple[float, ...],
        env: dict[str, int],
        anything: dict,
        mixed: int | str,
    ) -> None:
        return None

    assert _params(f)["properties"] == {
        "names": {"type": "array", "items": {"type": "string"}},
        "pair": {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "minItems": 2,
            "maxItems": 2,
        },
        "many": {"type": "array", "items": {"type": "number"}},
        "env": {"type": "object", "additionalProperties": {"type": "integer"}},
        "anything": {"type": "object"},
        "mixed": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
    }


def test_literals_and_enums() -> None:
    def f(
        mode: Literal["read", "write"],
        colour: Colour = Colour.RED,
        level: Level | None = None,
        odd: Literal[1, "one"] = 1,
    ) -> None:
        return None

    assert _params(f)["properties"] == {
        "mode": {"type": "string", "enum": ["read", "write"]},
        "colour": {"type": "string", "enum": ["red", "blue"], "default": "red"},
        "level": {"type": ["integer", "null"], "enum": [1, 2, None], "default": None},
        "odd": {"enum": [1, "one"], "default": 1},
    }


def test_nested_dataclass_and_typeddict() -> None:
    def f(at: Point, filters: Filters) -> None:
        return None

    assert _params(f)["properties"] == {
        "at": _obj(
            {
                "x": {"type": "number"},
                "y": {"type": "number", "default": 0.0},
                "label": {
                    "type": "string",
                    "description": "shown next to the point",
                    "default": "",
                },
            },
            ["x"],
        ),
        "filters": _obj({"pattern": {"type": "string"}, "depth": {"type": "integer"}}, ["pattern"]),
    }


def test_annotated_description_wins_over_docstring() -> None:
    def f(path: Annotated[str, "file to read"], limit: int = 10) -> None:
        """Read.

        Args:
            path: ignored, Annotated says it better
            limit: most lines to return
        """

    assert _params(f)["properties"] == {
        "path": {"type": "string", "description": "file to read"},
        "limit": {"type": "integer", "description": "most lines to return", "default": 10},
    }


def test_context_parameter_is_hidden_and_reported() -> None:
    def f(query: str, ctx: ToolContext) -> str:
        return query

    def g(query: str, context: ToolContext | None = None) -> str:
        return query

    assert function_schema(f)[1:] == (_obj({"query": {"type": "string"}}, ["query"]), "ctx")
    assert function_schema(g)[2] == "context"


def test_missing_hint_and_star_args_are_rejected_by_name() -> None:
    def no_hint(path, limit: int = 1) -> None:
        return None

    def star(*paths: str) -> None:
        return None

    def stars(**options: str) -> None:
        return None

    with pytest.raises(TypeError, match=r"'path'.*no type hint"):
        function_schema(no_hint)
    with pytest.raises(TypeError, match=r"\*paths"):
        function_schema(star)
    with pytest.raises(TypeError, match=r"\*options"):
        function_schema(stars)


def test_unsupported_type_is_a_clear_error() -> None:
    def f(when: complex) -> None:
        return None

    with pytest.raises(TypeError, match="unsupported type"):
        function_schema(f)


GOOGLE = """Search files for a pattern.

    Walks the tree below `path`.

    Args:
        pattern: a regular expression
            matched line by line.
        path (str): where to start.
        limit (int, optional): the most matches
            to report.

    Returns:
        The matches.
    """

NUMPY = """Search files for a pattern.

    Parameters
    ----------
    pattern : str
        a regular expression
        matched line by line.
    path : str
        where to start.
    limit, max_depth : int, optional
        bounds.

    Returns
    -------
    str
        The matches.
    """

SPHINX = """Search files for a pattern.
    Walks the tree.

    :param pattern: a regular expression
        matched line by line.
    :param str path: where to start.
    :param dict[str, int] limit: the most matches
    :returns: the matches
    """


def test_google_docstring() -> None:
    assert parse_docstring(GOOGLE) == (
        "Search files for a pattern.",
        {
            "pattern": "a regular expression matched line by line.",
            "path": "where to start.",
            "limit": "the most matches to report.",
        },
    )


def test_numpy_docstring() -> None:
    assert parse_docstring(NUMPY) == (
        "Search files for a pattern.",
        {
            "pattern": "a regular expression matched line by line.",
            "path": "where to start.",
            "limit": "bounds.",
            "max_depth": "bounds.",
        },
    )


def test_sphinx_docstring_and_multiline_first_paragraph() -> None:
    assert parse_docstring(SPHINX) == (
        "Search files for a pattern. Walks the tree.",
        {
            "pattern": "a regular expression matched line by line.",
            "path": "where to start.",
            "limit": "the most matches",
        },
    )


def test_docstring_descriptions_reach_the_schema() -> None:
    def search(pattern: str, path: str = ".") -> str:
        """Search files.

        :param pattern: what to look for
        :param path: where
        """
        return ""

    description, schema, _ = function_schema(search)
    assert description == "Search files."
    assert schema["properties"]["pattern"]["description"] == "what to look for"
    assert schema["properties"]["path"] == {
        "type": "string",
        "description": "where",
        "default": ".",
    }


# --- the decorator ---


def test_bare_decorator_builds_a_tool_that_is_still_the_function() -> None:
    @tool
    def add(a: int, b: int = 2) -> int:
        """Add two numbers."""
        return a + b

    assert isinstance(add, Tool)
    assert add(1) == 3
    assert add(a=1, b=5) == 6
    assert add.name == "add"
    assert add.__name__ == "add"
    assert add.__doc__ == "Add two numbers."
    assert add.schema() == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": _obj(
                {"a": {"type": "integer"}, "b": {"type": "integer", "default": 2}}, ["a"]
            ),
        },
    }


def test_decorator_options() -> None:
    def ready() -> bool:
        return False

    @tool(
        name="ask-user",
        description="Ask.",
        toolset="clarify",
        interactive=True,
        timeout=5.0,
        check=ready,
        max_result_chars=100,
    )
    def ask(question: str) -> str:
        """Ignored docstring."""
        return question

    assert (ask.name, ask.description, ask.toolset) == ("ask-user", "Ask.", "clarify")
    assert ask.interactive and ask.timeout == 5.0 and ask.max_result_chars == 100
    assert not ask.available()
    assert ask("hi") == "hi"

    @tool()
    def empty() -> str:
        return "ok"

    assert empty.name == "empty" and empty.description == ""
    assert empty.parameters == _obj({}, [])


def test_async_handler() -> None:
    @tool
    async def fetch(url: str) -> str:
        """Fetch a URL."""
        await asyncio.sleep(0)
        return url.upper()

    assert fetch.is_async
    assert asyncio.run(fetch.handler(url="a")) == "A"
    assert asyncio.run(fetch("b")) == "B"


def test_handler_rebuilds_annotated_types_from_json_values() -> None:
    seen: list[Any] = []

    @tool
    def draw(
        at: Point,
        colour: Colour,
        path: list[Point] | None = None,
        pair: tuple[int, Colour] = (0, Colour.RED),
    ) -> str:
        seen.append((at, colour, path, pair))
        return "done"

    assert (
        draw.handler(at={"x": 1.5}, colour="blue", path=[{"x": 0, "y": 1}], pair=[3, "red"])
        == "done"
    )
    assert seen == [(Point(1.5), Colour.BLUE, [Point(0, 1)], (3, Colour.RED))]
    seen.clear()
    draw.handler(at={"x": 2}, colour="red", path=None)
    assert seen == [(Point(2), Colour.RED, None, (0, Colour.RED))]


def test_async_handler_with_conversion_stays_async() -> None:
    @tool
    async def paint(colour: Colour) -> str:
        return colour.name

    assert paint.is_async
    assert asyncio.run(paint.handler(colour="blue")) == "BLUE"


def test_context_parameter_is_recorded_on_the_tool() -> None:
    @tool
    def where(ctx: ToolContext) -> str:
        return str(ctx.cwd)

    assert where.context_param == "ctx"
    assert where.parameters == _obj({}, [])


@pytest.mark.parametrize("bad", ["", "has space", "dot.ted", "x" * 65, "<lambda>"])
def test_invalid_names_are_refused(bad: str) -> None:
    def f() -> None:
        return None

    with pytest.raises(ValueError, match="invalid tool name"):
        tool(name=bad)(f) if bad != "<lambda>" else tool(lambda: None)


def test_decorating_a_tool_twice_is_refused() -> None:
    @tool
    def once() -> None:
        return None

    with pytest.raises(TypeError, match="plain function"):
        tool(once)
    assert isinstance(once, FunctionTool)
