"""Check a model's tool-call arguments against the tool's JSON schema before anything runs.

Covers the JSON Schema subset tools use: `type` (one or a list), `properties`, `required`,
`additionalProperties`, `items`, `prefixItems`, `minItems`, `maxItems`, `minimum`, `maximum`,
`exclusiveMinimum`, `exclusiveMaximum`, `minLength`, `maxLength`, `enum`, `anyOf`, `oneOf`
(treated as `anyOf`: the first matching branch wins) and OpenAPI's `nullable`. Other keywords
(`description`, `default`, ...) are ignored; missing optional keys stay missing, and so does an
optional key sent as `null` where null is not allowed (small models write `"limit": null` for
"no limit"; the tool's default is what they mean), and so does `"additionalProperties": false`
where the schema says just that (Qwen2.5-Coder 0.5B copies that line of the schema it was shown).

Models make small, unambiguous slips ("42" for 42, a JSON-encoded list inside a string), so a
few lossless coercions are applied; anything that could change meaning is refused with a
message that names the argument, what was expected and what was sent ("`timeout` must be a
number, got the string "ten""), so the model can retry.
Hand-written (no jsonschema, no pydantic) because this runs on every tool call.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

JsonSchema = dict[str, Any]

_INTEGER_TEXT = re.compile(r"[+-]?\d+")
_NUMBER_TEXT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_BOOLEAN_TEXT = {"true": True, "false": False}
_NOT_APPLICABLE = object()
_LONGEST_INT_BITS = 14_000
"""About 4,200 digits: within the int-to-text limit Python applies by default."""


class ArgumentError(ValueError):
    """The arguments do not fit the schema; the message says what to change. Never executed."""


class _Invalid(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems)
        self.problems = problems


def validate_arguments(schema: JsonSchema, raw: str | dict[str, Any]) -> dict[str, Any]:
    """Parse `raw` (JSON text or an already-parsed dict) and return the checked arguments."""
    arguments = _parse(raw) if isinstance(raw, str) else raw
    if not isinstance(arguments, dict):
        raise ArgumentError(
            f"the arguments must be a JSON object of named parameters, got {_describe(arguments)}"
        )
    if not all(isinstance(key, str) for key in arguments):
        raise ArgumentError("the arguments must be a JSON object: every name must be a string")
    try:
        checked = _object(schema, arguments, "", coerce=True)
    except _Invalid as exc:
        raise ArgumentError("; ".join(exc.problems)) from None
    return dict(checked)


def _parse(text: str) -> Any:
    if not text.strip():
        return {}
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_int=_whole_number)
    except json.JSONDecodeError as exc:
        cut_off = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        hint = " (it looks cut off)" if cut_off else ""
        raise ArgumentError(
            f"the arguments are not valid JSON{hint}: {exc.msg} (character {exc.pos}); "
            "send one complete JSON object"
        ) from None
    except ValueError as exc:
        raise ArgumentError(str(exc)) from None


def _whole_number(text: str) -> int:
    """Any length: Python's int() refuses more than 4,300 digits (a process-wide limit a
    library must not change), and the arguments must still parse so the problem can be
    named (`_too_large`)."""
    try:
        return int(text)
    except ValueError:
        import decimal

        return int(decimal.Decimal(text))


def _too_large(value: Any) -> bool:
    """A number no tool can use as it was sent: too long to print, or past a float's range."""
    if isinstance(value, float):
        return not math.isfinite(value)
    return isinstance(value, int) and value.bit_length() > _LONGEST_INT_BITS


def _reject_constant(name: str) -> Any:
    raise ValueError(f"the arguments contain {name}, which is not a JSON number")


def _validate(schema: Any, value: Any, path: str, coerce: bool) -> Any:
    if _too_large(value):
        raise _Invalid([f"{_name(path)} is a number too large to use; send a smaller one"])
    if not isinstance(schema, dict):
        return value
    if value is None and schema.get("nullable") is True:
        return None
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        value = _first_branch(branches, value, path, coerce)
    if "type" in schema:
        value = _typed(schema, value, path, coerce)
    elif "properties" in schema and isinstance(value, dict):
        value = _object(schema, value, path, coerce)
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        options = ", ".join(_json(option) for option in schema["enum"])
        raise _Invalid([f"{_name(path)} must be one of {options}; got {_json(value)}"])
    return value


def _first_branch(branches: list[Any], value: Any, path: str, coerce: bool) -> Any:
    """Exact matches win over coerced ones, so "42" stays a string when a string is allowed."""
    for allow_coercion in (False, True) if coerce else (False,):
        for branch in branches:
            try:
                return _validate(branch, value, path, allow_coercion)
            except _Invalid:
                continue
    kind = _kind(value)
    for branch in branches:
        if isinstance(branch, dict) and kind in _types(branch) and kind in ("object", "array"):
            _validate(branch, value, path, coerce)  # raises the branch's detailed problems
    expected = " or ".join(_expected(b) for b in branches)
    raise _Invalid([f"{_name(path)} must be {expected}, got {_describe(value)}"])


def _typed(schema: JsonSchema, value: Any, path: str, coerce: bool) -> Any:
    types = _types(schema)
    for kind in types:
        if _matches(kind, value):
            return _CHECKS[kind](schema, value, path, coerce)
    if coerce:
        for kind in types:
            converted = _COERCIONS.get(kind, _no_coercion)(value)
            if converted is not _NOT_APPLICABLE:
                return _CHECKS[kind](schema, converted, path, coerce)
    expected = " or ".join(_A_KIND.get(kind, kind) for kind in types)
    raise _Invalid([f"{_name(path)} must be {expected}, got {_describe(value)}"])


def _types(schema: JsonSchema) -> list[str]:
    kind = schema.get("type")
    if kind is None:
        return []
    kinds = [kind] if isinstance(kind, str) else list(kind)
    if schema.get("nullable") is True and "null" not in kinds:
        kinds.append("null")
    return kinds


def _matches(kind: str, value: Any) -> bool:
    if kind == "integer":
        return _is_number(value) and (isinstance(value, int) or float(value).is_integer())
    if kind == "number":
        return _is_number(value)
    expected = _PYTHON_TYPES.get(kind)
    return expected is not None and isinstance(value, expected)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "boolean": bool,
    "null": type(None),
    "array": list,
    "object": dict,
}


# --- per-type checks (the value already has the right JSON kind) ---


def _scalar(schema: JsonSchema, value: Any, path: str, coerce: bool) -> Any:
    return value


def _string(schema: JsonSchema, value: str, path: str, coerce: bool) -> str:
    low, high = schema.get("minLength"), schema.get("maxLength")
    if isinstance(low, int) and len(value) < low:
        raise _Invalid([f"{_name(path)} must have at least {low} characters, got {len(value)}"])
    if isinstance(high, int) and len(value) > high:
        raise _Invalid([f"{_name(path)} must have at most {high} characters, got {len(value)}"])
    return value


def _number(schema: JsonSchema, value: int | float, path: str, coerce: bool) -> int | float:
    for keyword, (fits, words) in _BOUNDS.items():
        bound = schema.get(keyword)
        if _is_number(bound) and not fits(value, bound):
            raise _Invalid([f"{_name(path)} must be {words} {bound:g}, got {_json(value)}"])
    return value


def _integer(schema: JsonSchema, value: Any, path: str, coerce: bool) -> int:
    return int(_number(schema, value, path, coerce))


_BOUNDS: dict[str, tuple[Callable[[Any, Any], bool], str]] = {
    "minimum": (lambda value, bound: value >= bound, "at least"),
    "maximum": (lambda value, bound: value <= bound, "at most"),
    "exclusiveMinimum": (lambda value, bound: value > bound, "more than"),
    "exclusiveMaximum": (lambda value, bound: value < bound, "less than"),
}


def _array(schema: JsonSchema, value: list[Any], path: str, coerce: bool) -> list[Any]:
    problems: list[str] = []
    low, high = schema.get("minItems"), schema.get("maxItems")
    if isinstance(low, int) and len(value) < low:
        problems.append(f"{_name(path)} needs at least {low} items, got {len(value)}")
    if isinstance(high, int) and len(value) > high:
        problems.append(f"{_name(path)} allows at most {high} items, got {len(value)}")
    prefix = schema.get("prefixItems") or []
    rest = schema.get("items", True)
    out: list[Any] = []
    for index, item in enumerate(value):
        item_schema = prefix[index] if index < len(prefix) else rest
        if item_schema is False:
            problems.append(f"{_name(path)} allows at most {len(prefix)} items")
            break
        try:
            out.append(_validate(item_schema, item, f"{path}[{index}]", coerce))
        except _Invalid as exc:
            problems.extend(exc.problems)
    if problems:
        raise _Invalid(problems)
    return out


def _object(schema: JsonSchema, value: dict[str, Any], path: str, coerce: bool) -> dict[str, Any]:
    properties: JsonSchema = schema.get("properties") or {}
    extra = schema.get("additionalProperties", True)
    required = schema.get("required") or []
    problems: list[str] = []
    out: dict[str, Any] = {}
    for key, item in value.items():
        child = f"{path}.{key}" if path else key
        if key in properties:
            item_schema = properties[key]
        elif key == "additionalProperties" and item is extra is False:
            continue  # the schema's own line, copied into the arguments by a small model
        elif extra is False:
            allowed = ", ".join(properties) or "none"
            problems.append(f"unknown argument {_name(child)} (allowed here: {allowed})")
            continue
        else:
            item_schema = extra
        if item is None and key not in required and not _allows_null(item_schema):
            continue  # null for an optional argument: absent, so its default applies
        try:
            out[key] = _validate(item_schema, item, child, coerce)
        except _Invalid as exc:
            problems.extend(exc.problems)
    for key in required:
        if key not in value:
            child = f"{path}.{key}" if path else key
            wanted = _expected(properties.get(key))
            kind = "" if wanted == "any value" else f" ({wanted})"
            problems.append(f"missing required argument {_name(child)}{kind}")
    if problems:
        raise _Invalid(problems)
    return out


def _allows_null(schema: Any) -> bool:
    """Whether `null` is a value the schema accepts (an untyped schema accepts anything)."""
    if not isinstance(schema, dict):
        return True
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        return any(_allows_null(branch) for branch in branches)
    if "enum" in schema:
        return None in schema["enum"]
    return "type" not in schema or "null" in _types(schema)


_CHECKS: dict[str, Callable[[JsonSchema, Any, str, bool], Any]] = {
    "string": _string,
    "boolean": _scalar,
    "null": _scalar,
    "number": _number,
    "integer": _integer,
    "array": _array,
    "object": _object,
}


# --- safe coercions: each returns _NOT_APPLICABLE when the value cannot be read losslessly ---


def _no_coercion(value: Any) -> Any:
    return _NOT_APPLICABLE


def _to_integer(value: Any) -> Any:
    if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value.strip()):
        return _read(int, value)
    return _NOT_APPLICABLE


def _to_number(value: Any) -> Any:
    if not isinstance(value, str) or not _NUMBER_TEXT.fullmatch(value.strip()):
        return _NOT_APPLICABLE
    if _INTEGER_TEXT.fullmatch(value.strip()):
        return _read(int, value)
    number = float(value)
    return number if math.isfinite(number) else _NOT_APPLICABLE


def _read(parse: Callable[[str], Any], text: str) -> Any:
    try:
        return parse(text)
    except ValueError:  # e.g. more digits than Python converts by default
        return _NOT_APPLICABLE


def _to_string(value: Any) -> Any:
    """An integer where text is expected (an id like 1 for "1") reads the same either way."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _NOT_APPLICABLE


def _to_boolean(value: Any) -> Any:
    if isinstance(value, str):
        return _BOOLEAN_TEXT.get(value.strip().lower(), _NOT_APPLICABLE)
    return _NOT_APPLICABLE


def _decoded(kind: type) -> Callable[[Any], Any]:
    """A JSON-encoded list/object sent as a string is decoded, if it decodes to that kind."""

    def decode(value: Any) -> Any:
        if not isinstance(value, str):
            return _NOT_APPLICABLE
        try:
            parsed = json.loads(value)
        except ValueError:
            return _NOT_APPLICABLE
        return parsed if isinstance(parsed, kind) else _NOT_APPLICABLE

    return decode


_COERCIONS: dict[str, Callable[[Any], Any]] = {
    "string": _to_string,
    "integer": _to_integer,
    "number": _to_number,
    "boolean": _to_boolean,
    "array": _decoded(list),
    "object": _decoded(dict),
}


# --- messages ---


def _same(value: Any, option: Any) -> bool:
    """Equality that keeps true apart from 1 (Python says True == 1; JSON does not)."""
    return isinstance(value, bool) == isinstance(option, bool) and value == option


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    for kind, python_type in _PYTHON_TYPES.items():
        if isinstance(value, python_type):
            return kind
    return type(value).__name__


_A_KIND = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
    "array": "an array",
    "object": "an object",
}


def _describe(value: Any) -> str:
    """What was sent, in words: "the string "ten"", "the number 4.5", "null", "an array [...]"."""
    kind = _kind(value)
    if value is None or isinstance(value, bool):
        return _json(value)
    if kind in ("array", "object"):
        return f"{_A_KIND[kind]} {_json(value)}"
    if kind in _A_KIND:
        return f"the {kind} {_json(value)}"
    return f"a {kind}"


def _json(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):  # e.g. an int longer than Python converts to text
        text = "(too large to show)"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _expected(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any value"
    if "enum" in schema:
        return "one of " + ", ".join(_json(option) for option in schema["enum"])
    kinds = _types(schema)
    if kinds:
        return " or ".join(_A_KIND.get(kind, kind) for kind in kinds)
    branches = schema.get("anyOf") or schema.get("oneOf")
    return " or ".join(_expected(b) for b in branches) if branches else "any value"


def _name(path: str) -> str:
    """The argument in backticks, the way the model would write it (`todos[1].id`)."""
    return f"`{path}`" if path else "the arguments"
