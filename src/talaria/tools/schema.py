"""A tool's JSON schema, read from a plain typed and documented Python function.

Written by hand rather than with pydantic: `import talaria` must stay fast, and the schemas stay
small (the model pays for every schema token on every request). The output is deterministic, so
the prompt prefix that holds the tool definitions is byte-stable.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, NotRequired, Required, Union, get_args, get_origin

from talaria.tools.base import ToolContext

JsonSchema = dict[str, Any]

_NONE = type(None)
_SCALARS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    _NONE: "null",
}


def function_schema(fn: Callable[..., Any]) -> tuple[str, JsonSchema, str | None]:
    """Return (description, parameters schema, name of the ToolContext parameter or None)."""
    description, param_docs = parse_docstring(inspect.getdoc(fn) or "")
    hints = resolve_hints(fn)
    properties: JsonSchema = {}
    required: list[str] = []
    context_param: str | None = None
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(
                f"tool function {_name(fn)!r} takes *{param.name}: tools need named parameters "
                "so the model can see them; list each one explicitly"
            )
        if param.name not in hints:
            raise TypeError(
                f"parameter {param.name!r} of tool function {_name(fn)!r} has no type hint; "
                "the model's schema is built from type hints"
            )
        hint = hints[param.name]
        if is_context_hint(hint):
            context_param = param.name
            continue
        properties[param.name] = _parameter_schema(param, hint, param_docs.get(param.name))
        if param.default is param.empty:
            required.append(param.name)
    return description, _object(properties, required), context_param


def resolve_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """Type hints with `Annotated` kept; string annotations are evaluated (PEP 563 modules)."""
    try:
        return typing.get_type_hints(fn, localns={"ToolContext": ToolContext}, include_extras=True)
    except NameError as exc:
        raise TypeError(
            f"cannot read the type hints of tool function {_name(fn)!r}: {exc} (types used in "
            "annotations must be importable from the function's module)"
        ) from exc


def is_context_hint(hint: Any) -> bool:
    """True for `ToolContext`, `ToolContext[S]`, either `| None`, and `Annotated` forms."""
    hint = _strip_annotated(hint)
    if get_origin(hint) in (Union, types.UnionType):
        members = [a for a in get_args(hint) if a is not _NONE]
        return len(members) == 1 and _is_context_class(members[0])
    return _is_context_class(hint)


def _is_context_class(hint: Any) -> bool:
    return hint is ToolContext or get_origin(hint) is ToolContext


def type_schema(hint: Any) -> JsonSchema:
    """The JSON schema of one Python type (see `_ORIGINS` and `_class_schema` for the list)."""
    return _schema(hint, ())


def _parameter_schema(param: inspect.Parameter, hint: Any, doc: str | None) -> JsonSchema:
    schema = type_schema(hint)
    if doc and "description" not in schema:
        schema["description"] = doc
    if param.default is not param.empty:
        ok, default = _json_default(param.default)
        if ok:
            schema["default"] = default
    return schema


def _schema(hint: Any, seen: tuple[type, ...]) -> JsonSchema:
    origin = get_origin(hint)
    if origin is not None and origin in _ORIGINS:
        return _ORIGINS[origin](hint, seen)
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if hint is Any:
        return {}
    if hint in _BARE:
        return {"type": _BARE[hint]}
    if isinstance(hint, type):
        return _class_schema(hint, seen)
    raise TypeError(f"unsupported type in a tool signature: {hint!r}")


def _annotated(hint: Any, seen: tuple[type, ...]) -> JsonSchema:
    inner, *metadata = get_args(hint)
    schema = dict(_schema(inner, seen))
    text = next((m for m in metadata if isinstance(m, str)), None)
    if text:
        schema["description"] = text
    return schema


def _union(hint: Any, seen: tuple[type, ...]) -> JsonSchema:
    members = [a for a in get_args(hint) if a is not _NONE]
    nullable = len(members) < len(get_args(hint))
    if len(members) == 1:
        inner = _schema(members[0], seen)
        return _nullable(inner) if nullable else inner
    branches = [_schema(member, seen) for member in members]
    if nullable:
        branches.append({"type": "null"})
    return {"anyOf": branches}


def _nullable(schema: JsonSchema) -> JsonSchema:
    """Allow null: a `type` list when the schema has one plain type, else an `anyOf`."""
    kind = schema.get("type")
    if not isinstance(kind, str):
        return {"anyOf": [schema, {"type": "null"}]}
    out = {**schema, "type": [kind, "null"]}
    if "enum" in out:
        out["enum"] = [*out["enum"], None]
    return out


def _literal(hint: Any, seen: tuple[type, ...]) -> JsonSchema:
    return _enum_schema([v.value if isinstance(v, enum.Enum) else v for v in get_args(hint)])


def _enum_schema(values: list[Any]) -> JsonSchema:
    kinds = {_SCALARS.get(type(v)) for v in values}
    if kinds == {"integer", "number"}:
        kinds = {"number"}
    schema: JsonSchema = {}
    if len(kinds) == 1 and None not in kinds:
        schema["type"] = kinds.pop()
    schema["enum"] = values
    return schema


def _list(hint: Any, seen: tuple[type, ...]) -> JsonSchema:
    args = get_args(hint)
    schema: JsonSchema = {"type": "array"}
    if args:
        schema["items"] = _schema(args[0], seen)
    return schema


def _tuple(hint: Any, seen: tuple[type, ...]) -> JsonSchema:
    args = get_args(hint)
    if not args:
        return {"type": "array"}
    if len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": _schema(args[0], seen)}
    return {
        "type": "array",
        "prefixItems": [_schema(arg, seen) for arg in args],
        "minItems": len(args),
        "maxItems": len(args),
    }


def _dict(hint: Any, seen: tuple[type, ...]) -> JsonSchema:
    args = get_args(hint)
    if args and args[0] is not str:
        raise TypeError(f"dict keys must be str in a tool signature (JSON objects): {hint!r}")
    schema: JsonSchema = {"type": "object"}
    if args:
        schema["additionalProperties"] = _schema(args[1], seen)
    return schema


def _unwrap(hint: Any, seen: tuple[type, ...]) -> JsonSchema:
    return _schema(get_args(hint)[0], seen)


_ORIGINS: dict[Any, Callable[[Any, tuple[type, ...]], JsonSchema]] = {
    Annotated: _annotated,
    Union: _union,
    types.UnionType: _union,
    Literal: _literal,
    list: _list,
    collections.abc.Sequence: _list,
    tuple: _tuple,
    dict: _dict,
    collections.abc.Mapping: _dict,
    Required: _unwrap,
    NotRequired: _unwrap,
}
_BARE: dict[Any, str] = {list: "array", tuple: "array", dict: "object"}


def _class_schema(cls: type, seen: tuple[type, ...]) -> JsonSchema:
    if issubclass(cls, enum.Enum):
        return _enum_schema([member.value for member in cls])
    if cls in seen:
        raise TypeError(f"recursive type {cls.__name__!r} cannot be a tool parameter")
    if typing.is_typeddict(cls):
        return _typeddict_schema(cls, (*seen, cls))
    if dataclasses.is_dataclass(cls):
        return _dataclass_schema(cls, (*seen, cls))
    raise TypeError(f"unsupported type in a tool signature: {cls.__name__!r}")


def _typeddict_schema(cls: type, seen: tuple[type, ...]) -> JsonSchema:
    hints = typing.get_type_hints(cls, include_extras=True)
    required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
    properties = {key: _schema(hint, seen) for key, hint in hints.items()}
    return _object(
        properties, [key for key, hint in hints.items() if _required(hint, key, required_keys)]
    )


def _required(hint: Any, key: str, required_keys: frozenset[str]) -> bool:
    """Read Required/NotRequired from the hint too: with string annotations (PEP 563)
    Python 3.11 cannot see them when it computes `__required_keys__`."""
    origin = get_origin(hint)
    if origin is NotRequired:
        return False
    return origin is Required or key in required_keys


def _dataclass_schema(cls: type, seen: tuple[type, ...]) -> JsonSchema:
    hints = typing.get_type_hints(cls, include_extras=True)
    properties: JsonSchema = {}
    required: list[str] = []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        schema = _schema(hints[field.name], seen)
        if field.default is not dataclasses.MISSING:
            ok, default = _json_default(field.default)
            if ok:
                schema["default"] = default
        elif field.default_factory is dataclasses.MISSING:
            required.append(field.name)
        properties[field.name] = schema
    return _object(properties, required)


def _object(properties: JsonSchema, required: list[str]) -> JsonSchema:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _json_default(value: Any) -> tuple[bool, Any]:
    """A default as JSON, or (False, None) when it has no JSON form (then it is left out)."""
    if isinstance(value, enum.Enum):
        value = value.value
    elif isinstance(value, tuple):
        value = list(value)
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False, None
    return True, value


def _strip_annotated(hint: Any) -> Any:
    while get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    return hint


def _name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn)))


# --- docstrings: the first paragraph describes the tool; sections describe the parameters ---

_GOOGLE_HEADER = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters)\s*:\s*$"
)
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:(.*)$")
_NUMPY_HEADERS = ("Parameters", "Other Parameters", "Keyword Arguments")
_NUMPY_RULE = re.compile(r"^\s*-{3,}\s*$")
_NUMPY_ENTRY = re.compile(r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:.*?\s)?\*{0,2}(\w+)\s*:(.*)$")
_ANY_GOOGLE_SECTION = re.compile(r"^[A-Z][A-Za-z ]*:\s*$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) from Google, NumPy or Sphinx docstrings."""
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    params: dict[str, str] = {}
    for parser in (_google_params, _numpy_params, _sphinx_params):
        for name, text in parser(lines).items():
            params.setdefault(name, text)
    return _first_paragraph(lines), params


def _first_paragraph(lines: list[str]) -> str:
    words: list[str] = []
    for index, line in enumerate(lines):
        text = line.strip()
        if not text or _starts_section(lines, index):
            break
        words.append(text)
    return " ".join(words)


def _starts_section(lines: list[str], index: int) -> bool:
    text = lines[index].strip()
    if text.startswith(":") or _ANY_GOOGLE_SECTION.match(text):
        return True
    return index + 1 < len(lines) and bool(_NUMPY_RULE.match(lines[index + 1]))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _google_params(lines: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    for start, header in enumerate(lines):
        if not _GOOGLE_HEADER.match(header.strip()):
            continue
        base = _indent(header)
        entry_indent: int | None = None
        current: str | None = None
        for line in lines[start + 1 :]:
            if not line.strip():
                continue
            indent = _indent(line)
            if indent <= base:
                break
            entry_indent = indent if entry_indent is None else entry_indent
            match = _GOOGLE_ENTRY.match(line.strip()) if indent == entry_indent else None
            if match:
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current is not None:
                params[current] = _join(params[current], line)
    return params


def _numpy_params(lines: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    for start in range(len(lines) - 1):
        if lines[start].strip() not in _NUMPY_HEADERS or not _NUMPY_RULE.match(lines[start + 1]):
            continue
        base = _indent(lines[start])
        current: list[str] = []
        for index in range(start + 2, len(lines)):
            line = lines[index]
            if not line.strip():
                continue
            if _indent(line) <= base:
                if index + 1 < len(lines) and _NUMPY_RULE.match(lines[index + 1]):
                    break
                match = _NUMPY_ENTRY.match(line.strip())
                current = (
                    [n.strip().lstrip("*") for n in match.group(1).split(",")] if match else []
                )
                for name in current:
                    params[name] = ""
            else:
                for name in current:
                    params[name] = _join(params[name], line)
    return params


def _sphinx_params(lines: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    current: str | None = None
    for line in lines:
        text = line.strip()
        match = _SPHINX_PARAM.match(text)
        if match:
            current = match.group(1)
            params[current] = match.group(2).strip()
        elif not text or text.startswith(":"):
            current = None
        elif current is not None and _indent(line) > 0:
            params[current] = _join(params[current], line)
    return params


def _join(text: str, line: str) -> str:
    return f"{text} {line.strip()}".strip()
