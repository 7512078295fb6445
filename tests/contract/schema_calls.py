"""Tool calls generated from a tool's own JSON schema, and the checks every result must pass.

`calls(schema, hints)` draws a `GeneratedCall`: every documented argument absent, present with a
valid value, at a bound, wrong-typed or null; what the draw broke on purpose is recorded in
`expected`, so a test can check that the answer names each broken argument. `hints` replace the
valid values of arguments whose free text would be unsafe or slow to run (a shell command, a
path, a duration): the other kinds of draw still come from the schema.

`leaks(text, allowed)` finds what must never reach a model or a user: a Python exception class
name, a traceback, a module path of talaria or of an installed package.
"""

from __future__ import annotations

import decimal
import json
import re
import string
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

Hints = dict[str, st.SearchStrategy[Any]]

SAFE_TEXT = st.text(alphabet=string.ascii_letters + string.digits + " _-.", max_size=24)
"""Free text without a slash or shell syntax: a path stays in the working directory."""

_INTERNALS = re.compile(
    r"Traceback \(most recent call last\)"
    r"|\b[A-Z]\w*(?:Error|Exception|Warning)\b"
    r"|\b(?:SystemExit|KeyboardInterrupt|GeneratorExit|StopIteration|StopAsyncIteration)\b"
    r"|\btalaria/|site-packages|\bFile \"[^\"]*\", line \d+"
    r"|<(?:\w+\.)*\w+ object at 0x[0-9a-f]+>"
)

_WRONG: dict[str, list[Any]] = {
    "string": [["a", "list"], {"an": "object"}, True, 4.5],
    "integer": ["ten", 4.5, True, ["1"], {"n": 1}],
    "number": ["ten", False, [1], {"n": 1}],
    "boolean": ["maybe", 2, [True], {"b": True}],
    "array": ["not a list", 3, True, {"an": "object"}],
    "object": ["not an object", 3, False, ["a"]],
}
"""Values of a kind the validator may not turn into the expected one (it reads "42" as 42)."""


@dataclass
class GeneratedCall:
    arguments: dict[str, Any]
    expected: list[tuple[str, str]] = field(default_factory=list)
    """(argument, what the error must say about it) for each argument broken on purpose."""

    @property
    def valid(self) -> bool:
        return not self.expected


def calls(schema: dict[str, Any], hints: Hints | None = None) -> st.SearchStrategy[GeneratedCall]:
    """Calls of a tool whose parameters are `schema` (an object schema)."""
    return _object_call(schema, hints or {}, "")


def _object_call(schema: dict[str, Any], hints: Hints, path: str) -> st.SearchStrategy[Any]:
    properties: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])

    @st.composite
    def draw(data: st.DrawFn) -> GeneratedCall:
        call = GeneratedCall({})
        for name, sub in properties.items():
            where = f"{path}.{name}" if path else name
            optional = name not in required
            kinds = ["valid", "valid", "bound", "wrong", "null"] + (["absent"] if optional else [])
            kind = data(st.sampled_from(kinds))
            if kind == "absent":
                if not optional:
                    call.expected.append((where, "missing required argument"))
                continue
            if kind == "null":
                call.arguments[name] = None
                if not optional and not _allows_null(sub):
                    call.expected.append((where, "must be"))
                continue
            value, problem = data(_value(sub, hints.get(name), where, kind))
            call.arguments[name] = value
            call.expected.extend(problem)
        if not path and data(st.integers(0, 5)) == 0:
            call.arguments["unexpected"] = 1  # an argument the schema does not have
            if schema.get("additionalProperties") is False:
                call.expected.append(("unexpected", "unknown argument"))
        return call

    return draw()


def _value(
    schema: dict[str, Any], hint: st.SearchStrategy[Any] | None, where: str, kind: str
) -> st.SearchStrategy[tuple[Any, list[tuple[str, str]]]]:
    """(value, problems) of one argument drawn as `kind` (valid, bound or wrong)."""
    types = _types(schema)
    if kind == "wrong" and types and "enum" not in schema:
        wrong = [v for t in types for v in _WRONG.get(t, []) if _kind(v) not in types]
        wrong = [v for v in wrong if not ("number" in types and _kind(v) == "integer")]
        if wrong:
            return st.sampled_from(wrong).map(lambda v: (v, [(where, "must be")]))
    if kind == "wrong" and "enum" in schema:
        return st.just(("not-an-option", [(where, "must be one of")]))
    if kind == "bound":
        bounds = _bounds(schema, where)
        if bounds:
            return st.sampled_from(bounds)
    if hint is not None:
        return hint.map(lambda v: (v, []))
    return _valid(schema, where).map(lambda v: (v, []))


def _valid(schema: dict[str, Any], where: str) -> st.SearchStrategy[Any]:
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        return st.one_of([_valid(branch, where) for branch in branches])
    types = [t for t in _types(schema) if t != "null"] or ["string"]
    return st.one_of([_VALID[t](schema, where) for t in types])


def _string(schema: dict[str, Any], where: str) -> st.SearchStrategy[Any]:
    low = schema.get("minLength", 0)
    return SAFE_TEXT.filter(lambda text: len(text) >= low)


def _integer(schema: dict[str, Any], where: str) -> st.SearchStrategy[Any]:
    low, high = _range(schema)
    return st.integers(
        min_value=None if low is None else int(low) + (1 if "exclusiveMinimum" in schema else 0),
        max_value=None if high is None else int(high),
    ).filter(lambda n: low is None or n > low or "exclusiveMinimum" not in schema)


def _number(schema: dict[str, Any], where: str) -> st.SearchStrategy[Any]:
    low, high = _range(schema)
    exclusive = "exclusiveMinimum" in schema
    return st.one_of(
        _integer(schema, where),
        st.floats(
            min_value=low,
            max_value=high,
            exclude_min=exclusive,
            allow_nan=False,
            allow_infinity=False,
        ),
    )


def _array(schema: dict[str, Any], where: str) -> st.SearchStrategy[Any]:
    items = schema.get("items")
    item = _valid(items, f"{where}[]") if isinstance(items, dict) else SAFE_TEXT
    if isinstance(items, dict) and items.get("type") == "object":
        item = _object_call(items, {}, where).filter(lambda c: c.valid).map(lambda c: c.arguments)
    return st.lists(
        item, min_size=schema.get("minItems", 0), max_size=min(3, schema.get("maxItems", 3))
    )


def _object(schema: dict[str, Any], where: str) -> st.SearchStrategy[Any]:
    if "properties" not in schema:
        return st.dictionaries(SAFE_TEXT, SAFE_TEXT, max_size=2)
    return _object_call(schema, {}, where).filter(lambda c: c.valid).map(lambda c: c.arguments)


_VALID = {
    "string": _string,
    "integer": _integer,
    "number": _number,
    "boolean": lambda schema, where: st.booleans(),
    "array": _array,
    "object": _object,
}


def _bounds(schema: dict[str, Any], where: str) -> list[tuple[Any, list[tuple[str, str]]]]:
    """Values at and past the documented bounds, each with the problem it must cause."""
    types = _types(schema)
    found: list[tuple[Any, list[tuple[str, str]]]] = []
    if "integer" in types or "number" in types:
        low, high = _range(schema)
        for value in (0, -1, 10**30, -(10**30)):
            found.append((value, _out_of_range(schema, value, where)))
        found.append((10**5000, [(where, "too large")]))
        for bound in (low, high):
            if bound is not None:
                for value in (bound - 1, bound, bound + 1):
                    found.append((value, _out_of_range(schema, value, where)))
        if "number" in types:
            found.append((1e308, _out_of_range(schema, 1e308, where)))
    if "string" in types and "enum" not in schema:
        found += [("", []), ("x" * 5000, []), (" \t\n", [])]
    if "array" in types:
        found.append(([], [(where, "at least")] if schema.get("minItems", 0) > 0 else []))
    return found


def _out_of_range(schema: dict[str, Any], value: Any, where: str) -> list[tuple[str, str]]:
    checks = {
        "minimum": (lambda bound: value >= bound, "at least"),
        "maximum": (lambda bound: value <= bound, "at most"),
        "exclusiveMinimum": (lambda bound: value > bound, "more than"),
        "exclusiveMaximum": (lambda bound: value < bound, "less than"),
    }
    for keyword, (fits, words) in checks.items():
        if keyword in schema and not fits(schema[keyword]):
            return [(where, words)]
    if "integer" in _types(schema) and "number" not in _types(schema) and value != int(value):
        return [(where, "must be")]
    return []


def _range(schema: dict[str, Any]) -> tuple[Any, Any]:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    return low, high


def _types(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type")
    if kind is None:
        return []
    return [kind] if isinstance(kind, str) else list(kind)


def _allows_null(schema: dict[str, Any]) -> bool:
    if schema.get("nullable") or "null" in _types(schema):
        return True
    branches = schema.get("anyOf") or schema.get("oneOf") or []
    return any(_allows_null(branch) for branch in branches) or (
        not _types(schema) and not branches and "enum" not in schema
    )


_KINDS = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}


def _kind(value: Any) -> str:
    """The JSON kind of a value this module generates."""
    return _KINDS.get(type(value), "object" if isinstance(value, dict) else "null")


def leaks(text: str, allowed: str = "") -> list[str]:
    """Internal details in `text` (a marker that also occurs in `allowed`, the arguments the
    model sent, is the model's own and does not count)."""
    return [found.group(0) for found in _INTERNALS.finditer(text) if found.group(0) not in allowed]


def as_json(arguments: dict[str, Any]) -> str:
    """The arguments as the model would send them, numbers of any length included (Python's
    json refuses ints past 4,300 digits; a model's JSON has no such limit)."""
    huge: dict[str, str] = {}

    def swap(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: swap(item) for key, item in value.items()}
        if isinstance(value, list):
            return [swap(item) for item in value]
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 9000:
            token = f"@@huge{len(huge)}@@"
            huge[f'"{token}"'] = str(decimal.Decimal(value))
            return token
        return value

    text = json.dumps(swap(arguments))
    for token, digits in huge.items():
        text = text.replace(token, digits)
    return text
