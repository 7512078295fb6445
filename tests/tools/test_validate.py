"""Argument validation: what passes, what is safely coerced, what is refused and how it reads."""

from __future__ import annotations

import json
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from talaria.tools.validate import ArgumentError, validate_arguments


def _schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required or [],
        "additionalProperties": False,
    }


def _one(field: dict[str, Any], value: Any) -> Any:
    return validate_arguments(_schema({"v": field}), {"v": value})["v"]


COERCED = [
    ({"type": "integer"}, "42", 42),
    ({"type": "integer"}, " -7 ", -7),
    ({"type": "integer"}, 3.0, 3),
    ({"type": "number"}, "4.5", 4.5),
    ({"type": "number"}, "1e3", 1000.0),
    ({"type": "number"}, "12", 12),
    ({"type": "boolean"}, "true", True),
    ({"type": "boolean"}, "False", False),
    ({"type": "string"}, 7, "7"),
    ({"type": "array", "items": {"type": "integer"}}, "[1, 2]", [1, 2]),
    ({"type": "array", "items": {"type": "integer"}}, '["1", 2]', [1, 2]),
    ({"type": "object", "properties": {"a": {"type": "string"}}}, '{"a": "x"}', {"a": "x"}),
    ({"type": ["integer", "null"]}, "5", 5),
    ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "5", 5),
]


@pytest.mark.parametrize(("field", "given_value", "expected"), COERCED)
def test_safe_coercions(field: dict[str, Any], given_value: Any, expected: Any) -> None:
    result = _one(field, given_value)
    assert result == expected
    assert type(result) is type(expected)


REFUSED = [
    ({"type": "integer"}, 4.5, "must be an integer, got the number 4.5"),
    ({"type": "integer"}, True, "must be an integer, got true"),
    ({"type": "integer"}, "4.5", 'must be an integer, got the string "4.5"'),
    ({"type": "integer"}, "forty", 'must be an integer, got the string "forty"'),
    ({"type": "number"}, False, "must be a number, got false"),
    ({"type": "number"}, "1e999", "must be a number"),
    ({"type": "number"}, "NaN", "must be a number"),
    ({"type": "boolean"}, 1, "must be true or false, got the integer 1"),
    ({"type": "boolean"}, "yes", 'must be true or false, got the string "yes"'),
    ({"type": "string"}, 4.5, "must be a string, got the number 4.5"),
    ({"type": "string"}, True, "must be a string, got true"),
    ({"type": "array", "items": {"type": "string"}}, "a", 'must be an array, got the string "a"'),
    ({"type": "array", "items": {"type": "string"}}, 5, "must be an array, got the integer 5"),
    ({"type": "array", "items": {"type": "string"}}, '{"a": 1}', "must be an array"),
    ({"type": "object"}, "[1]", 'must be an object, got the string "[1]"'),
    ({"type": "object"}, [1], "must be an object, got an array [1]"),
    ({"type": "string", "enum": ["r", "w"]}, "x", 'must be one of "r", "w"; got "x"'),
    ({"enum": [1, 2]}, True, "must be one of 1, 2; got true"),
    ({"type": "array", "maxItems": 1}, [1, 2], "allows at most 1 items"),
    ({"anyOf": [{"type": "integer"}, {"type": "boolean"}]}, "x", "an integer or true or false"),
    ({"type": "integer", "minimum": 1, "maximum": 20}, 0, "must be at least 1, got 0"),
    ({"type": "integer", "minimum": 1, "maximum": 20}, 21, "must be at most 20, got 21"),
    ({"type": "number", "exclusiveMinimum": 0}, 0, "must be more than 0, got 0"),
    ({"type": "string", "minLength": 2}, "a", "must have at least 2 characters, got 1"),
]


@pytest.mark.parametrize(("field", "given_value", "message"), REFUSED)
def test_refusals_name_the_field_and_what_was_wrong(
    field: dict[str, Any], given_value: Any, message: str
) -> None:
    with pytest.raises(ArgumentError) as info:
        _one(field, given_value)
    assert "`v` " in str(info.value)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "raw", ['{"v": 1' + "0" * 5000 + "}", '{"v": 1e400}', '{"v": [-1' + "0" * 5000 + "]}"]
)
def test_a_number_too_large_to_use_is_refused_by_name(raw: str) -> None:
    schema = _schema({"v": {"type": ["integer", "number", "array"]}})
    with pytest.raises(ArgumentError, match=r"^`v(\[0\])?` is a number too large to use"):
        validate_arguments(schema, raw)
    with pytest.raises(ArgumentError, match=r"^`v` is a number too large to use"):
        _one({"type": "integer", "maximum": 5}, 10**5000)


def test_exact_match_beats_coercion_in_unions() -> None:
    assert _one({"type": ["string", "integer"]}, "42") == "42"
    assert _one({"anyOf": [{"type": "string"}, {"type": "integer"}]}, "42") == "42"
    assert _one({"type": ["integer", "string"]}, "42") == "42"
    assert _one({"type": "string", "nullable": True}, None) is None


def test_json_text_is_parsed() -> None:
    schema = _schema({"path": {"type": "string"}, "n": {"type": "integer"}}, ["path"])
    assert validate_arguments(schema, '{"path": "a.py", "n": "3"}') == {"path": "a.py", "n": 3}


def test_missing_optional_keys_stay_missing() -> None:
    schema = _schema({"path": {"type": "string"}, "n": {"type": "integer", "default": 5}})
    assert validate_arguments(schema, "{}") == {}
    assert validate_arguments(schema, "") == {}


@pytest.mark.parametrize("raw", ['{"path": "a.py", "n": ', '{"path": "a.py"', '{"path": "a'])
def test_truncated_json_is_refused(raw: str) -> None:
    with pytest.raises(ArgumentError, match=r"not valid JSON \(it looks cut off\)"):
        validate_arguments(_schema({"path": {"type": "string"}}), raw)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{path: 1}", "not valid JSON"),
        ('["a"]', "must be a JSON object"),
        ('"a"', "must be a JSON object"),
        ('{"n": NaN}', "NaN"),
    ],
)
def test_bad_json_and_non_objects_are_refused(raw: str, message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        validate_arguments(_schema({"n": {"type": "number"}}), raw)


def test_unknown_and_missing_keys_are_reported_together() -> None:
    schema = _schema({"path": {"type": "string"}, "limit": {"type": "integer"}}, ["path"])
    with pytest.raises(ArgumentError) as info:
        validate_arguments(schema, {"pth": "a", "limit": "x"})
    message = str(info.value)
    assert "unknown argument `pth` (allowed here: path, limit)" in message
    assert '`limit` must be an integer, got the string "x"' in message
    assert "missing required argument `path` (a string)" in message


def test_nested_paths_are_named() -> None:
    point = _schema({"x": {"type": "number"}}, ["x"])
    schema = _schema({"points": {"type": "array", "items": point}})
    with pytest.raises(ArgumentError) as info:
        validate_arguments(schema, {"points": [{"x": 1}, {"x": "a"}, {}]})
    message = str(info.value)
    assert "`points[1].x` must be a number" in message
    assert "missing required argument `points[2].x` (a number)" in message


def test_nullable_object_reports_the_inner_problem() -> None:
    point = _schema({"x": {"type": "number"}}, ["x"])
    schema = _schema({"at": {"anyOf": [point, {"type": "null"}]}})
    with pytest.raises(ArgumentError, match=r"missing required argument `at\.x`"):
        validate_arguments(schema, {"at": {}})


def test_additional_properties_schema_validates_values() -> None:
    schema = _schema({"env": {"type": "object", "additionalProperties": {"type": "integer"}}})
    assert validate_arguments(schema, {"env": {"A": "1"}}) == {"env": {"A": 1}}
    with pytest.raises(ArgumentError, match=r"`env\.B` must be an integer"):
        validate_arguments(schema, {"env": {"B": "x"}})


def test_tuple_shape() -> None:
    pair = {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "minItems": 2,
        "maxItems": 2,
    }
    assert _one(pair, ["1", "a"]) == [1, "a"]
    with pytest.raises(ArgumentError, match="at least 2 items"):
        _one(pair, [1])


def test_null_for_an_optional_argument_means_absent() -> None:
    schema = _schema(
        {
            "path": {"type": "string"},
            "limit": {"type": "integer"},
            "note": {"type": ["string", "null"]},
        },
        ["path"],
    )
    arguments = {"path": "a.py", "limit": None, "note": None}
    assert validate_arguments(schema, arguments) == {"path": "a.py", "note": None}
    items = _schema(
        {
            "todos": {
                "type": "array",
                "items": _schema({"id": {"type": "string"}, "done": {"type": "boolean"}}, ["id"]),
            }
        }
    )
    assert validate_arguments(items, {"todos": [{"id": "1", "done": None}]}) == {
        "todos": [{"id": "1"}]
    }


def test_the_schemas_own_additional_properties_line_copied_into_the_arguments_is_dropped() -> None:
    """Small models copy `"additionalProperties": false` from the schema they were shown."""
    schema = _schema({"path": {"type": "string"}}, ["path"])
    assert validate_arguments(schema, {"path": "a", "additionalProperties": False}) == {"path": "a"}
    with pytest.raises(ArgumentError, match="unknown argument `additionalProperties`"):
        validate_arguments(schema, {"path": "a", "additionalProperties": {"x": 1}})


def test_null_for_a_required_argument_says_what_was_expected() -> None:
    schema = _schema({"path": {"type": "string"}}, ["path"])
    with pytest.raises(ArgumentError) as info:
        validate_arguments(schema, {"path": None})
    assert str(info.value) == "`path` must be a string, got null"


def test_caller_dict_is_not_mutated() -> None:
    given_args = {"n": "3"}
    validate_arguments(_schema({"n": {"type": "integer"}}), given_args)
    assert given_args == {"n": "3"}


# --- property: every valid value survives a JSON round trip unchanged ---

_SCALAR_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "string": st.one_of(  # include text that a coercion could misread
        st.text(max_size=10),
        st.integers().map(str),
        st.sampled_from(["true", "False", "4.5", "[1]", "{}", "null"]),
    ),
    "integer": st.integers(min_value=-(2**53), max_value=2**53),
    "number": st.one_of(
        st.integers(min_value=-(2**53), max_value=2**53),
        st.floats(allow_nan=False, allow_infinity=False),
    ),
    "boolean": st.booleans(),
    "null": st.none(),
}
_keys = st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=6)


def _leaf() -> st.SearchStrategy[dict[str, Any]]:
    plain = st.sampled_from(sorted(_SCALAR_VALUES)).map(lambda kind: {"type": kind})
    nullable = st.sampled_from(["string", "integer", "number", "boolean"]).flatmap(
        lambda kind: st.sampled_from([{"type": [kind, "null"]}, {"type": kind, "nullable": True}])
    )
    enum = st.lists(st.text(max_size=5), min_size=1, max_size=4, unique=True).map(
        lambda values: {"type": "string", "enum": values}
    )
    union = st.lists(
        st.sampled_from(sorted(_SCALAR_VALUES)), min_size=2, max_size=3, unique=True
    ).map(lambda kinds: {"anyOf": [{"type": k} for k in kinds]})
    return st.one_of(plain, nullable, enum, union)


def _object_schema(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    return st.dictionaries(_keys, children, max_size=4).flatmap(
        lambda props: (
            st.lists(st.sampled_from(sorted(props)), unique=True).map(
                lambda required: _schema(props, required)
            )
            if props
            else st.just(_schema({}))
        )
    )


_schemas = st.recursive(
    _leaf(),
    lambda children: st.one_of(
        children.map(lambda item: {"type": "array", "items": item}),
        _object_schema(children),
    ),
    max_leaves=8,
)


def _values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([_values(branch) for branch in schema["anyOf"]])
    kind = schema["type"]
    if isinstance(kind, list) or schema.get("nullable"):
        return st.one_of(st.none(), _values({"type": kind[0] if isinstance(kind, list) else kind}))
    if kind == "array":
        return st.lists(_values(schema["items"]), max_size=3)
    if kind == "object":
        return _object_values(schema)
    return _SCALAR_VALUES[kind]


def _object_values(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    props = schema["properties"]
    required = {key: _values(props[key]) for key in schema["required"]}
    optional = {key: _values(sub) for key, sub in props.items() if key not in required}
    return st.fixed_dictionaries(required, optional=optional)


@settings(max_examples=300, deadline=None)
@given(st.data(), _object_schema(_schemas))
def test_valid_values_round_trip_unchanged(data: st.DataObject, schema: dict[str, Any]) -> None:
    value = data.draw(_object_values(schema))
    assert validate_arguments(schema, json.dumps(value)) == value
