"""`@tool`: turn a typed, documented function into a `Tool` the model can call.

The decorated name becomes a `FunctionTool`, a `Tool` whose `__call__` runs the original
function untouched, so users' own tests keep calling it like a function. The `handler` the
executor calls is different in one way: arguments arrive as validated JSON values, and it turns
them back into the annotated Python types (an `Enum` member, a dataclass instance, a tuple)
before calling the function. TypedDicts stay dicts, as they are at runtime anyway.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, NotRequired, Required, Union, get_args, get_origin, overload

from talaria.tools.base import Tool
from talaria.tools.schema import function_schema, is_context_hint, resolve_hints

_VALID_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")

Converter = Callable[[Any], Any]


class FunctionTool(Tool):
    """A `Tool` built by `@tool`; calling it calls the decorated function directly."""

    __wrapped__: Callable[..., Any]
    __name__: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    toolset: str = "custom",
    interactive: bool = False,
    timeout: float | None = None,
    check: Callable[[], bool] | None = None,
    max_result_chars: int | None = None,
    retry_safe: bool = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    toolset: str = "custom",
    interactive: bool = False,
    timeout: float | None = None,
    check: Callable[[], bool] | None = None,
    max_result_chars: int | None = None,
    retry_safe: bool = False,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a tool from a function; use as `@tool`, `@tool()` or `@tool(name=..., ...)`.

    The name defaults to the function's name, the description to the docstring's first
    paragraph; parameters come from the type hints and the docstring's Args section.
    """

    def build(function: Callable[..., Any]) -> FunctionTool:
        if isinstance(function, Tool) or not callable(function):
            raise TypeError(f"@tool needs a plain function, got {function!r}")
        tool_name = str(getattr(function, "__name__", "")) if name is None else name
        check_name(tool_name)
        doc_description, parameters, context_param = function_schema(function)
        made = FunctionTool(
            name=tool_name,
            description=doc_description if description is None else description,
            parameters=parameters,
            handler=_bind(function, argument_converters(function)),
            toolset=toolset,
            interactive=interactive,
            context_param=context_param,
            check=check,
            timeout=timeout,
            max_result_chars=max_result_chars,
            retry_safe=retry_safe,
        )
        functools.update_wrapper(made, function, updated=())
        return made

    return build if fn is None else build(fn)


def check_name(name: str) -> None:
    """Providers reject other names, so refuse them when the tool is defined, not mid-turn."""
    if not _VALID_NAME.fullmatch(name):
        raise ValueError(
            f"invalid tool name {name!r}: use 1 to 64 characters from letters, digits, '_' "
            "and '-' (pass name=... to @tool)"
        )


def argument_converters(fn: Callable[..., Any]) -> dict[str, Converter]:
    """Per parameter, how to rebuild its annotated type from JSON values (only where needed)."""
    converters: dict[str, Converter] = {}
    for param_name, hint in resolve_hints(fn).items():
        if param_name == "return" or is_context_hint(hint):
            continue
        converter = _converter(hint)
        if converter is not None:
            converters[param_name] = converter
    return converters


def _bind(fn: Callable[..., Any], converters: dict[str, Converter]) -> Callable[..., Any]:
    if not converters:
        return fn

    def convert(kwargs: dict[str, Any]) -> dict[str, Any]:
        return {k: converters[k](v) if k in converters else v for k, v in kwargs.items()}

    if inspect.iscoroutinefunction(fn):

        async def async_handler(*args: Any, **kwargs: Any) -> Any:
            return await fn(*args, **convert(kwargs))

        return functools.wraps(fn)(async_handler)

    def handler(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **convert(kwargs))

    return functools.wraps(fn)(handler)


def _converter(hint: Any) -> Converter | None:
    while get_origin(hint) in (Annotated, Required, NotRequired):
        hint = get_args(hint)[0]
    origin = get_origin(hint)
    if origin is not None:
        build = _GENERIC_CONVERTERS.get(origin)
        return build(get_args(hint)) if build is not None else None
    if hint is tuple:
        return tuple
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass_converter(hint)
    if typing.is_typeddict(hint):
        return _fields_converter(typing.get_type_hints(hint, include_extras=True))
    return None


def _optional_converter(args: tuple[Any, ...]) -> Converter | None:
    members = [a for a in args if a is not type(None)]
    inner = _converter(members[0]) if len(members) == 1 else None
    if inner is None:
        return None
    return lambda value: None if value is None else inner(value)


def _list_converter(args: tuple[Any, ...]) -> Converter | None:
    item = _converter(args[0]) if args else None
    if item is None:
        return None
    return lambda value: [item(v) for v in value]


def _tuple_converter(args: tuple[Any, ...]) -> Converter:
    if len(args) == 2 and args[1] is Ellipsis:
        item = _converter(args[0]) or _identity
        return lambda value: tuple(item(v) for v in value)
    items = [_converter(arg) or _identity for arg in args]
    return lambda value: tuple(convert(v) for convert, v in zip(items, value, strict=False))


def _dict_converter(args: tuple[Any, ...]) -> Converter | None:
    item = _converter(args[1]) if len(args) == 2 else None
    if item is None:
        return None
    return lambda value: {k: item(v) for k, v in value.items()}


def _dataclass_converter(cls: type) -> Converter:
    fields = _fields_converter(typing.get_type_hints(cls, include_extras=True)) or _identity
    return lambda value: cls(**fields(value))


def _fields_converter(hints: dict[str, Any]) -> Converter | None:
    converters = {key: c for key, hint in hints.items() if (c := _converter(hint)) is not None}
    if not converters:
        return None
    return lambda value: {k: converters[k](v) if k in converters else v for k, v in value.items()}


def _identity(value: Any) -> Any:
    return value


_GENERIC_CONVERTERS: dict[Any, Callable[[tuple[Any, ...]], Converter | None]] = {
    Union: _optional_converter,
    types.UnionType: _optional_converter,
    list: _list_converter,
    collections.abc.Sequence: _list_converter,
    tuple: _tuple_converter,
    dict: _dict_converter,
    collections.abc.Mapping: _dict_converter,
}
