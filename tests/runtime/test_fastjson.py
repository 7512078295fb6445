"""The hot path's JSON: the same compact text and the same errors as the standard library,
with orjson loaded or not."""

from __future__ import annotations

import dataclasses
import datetime
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from talaria import fastjson


@pytest.fixture(params=["standard library", "orjson"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(fastjson, "_orjson", None)
    monkeypatch.setattr(fastjson, "_tried", False)
    if request.param == "orjson":
        fastjson.warm()
    yield request.param


def stdlib(value: Any, **options: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), **options)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=30,
)


@given(value=JSON_VALUES)
def test_values_read_back_as_they_were_in_both_modes(value: Any) -> None:
    for loaded in (False, True):
        saved = fastjson._orjson, fastjson._tried
        try:
            fastjson._orjson, fastjson._tried = None, False
            if loaded:
                fastjson.warm()
            text = fastjson.dumps(value)
            assert text == stdlib(value)  # no floats here: the text is the same byte for byte
            assert fastjson.dumpb(value) == text.encode()
            assert fastjson.loads(text) == value
            assert fastjson.loads(text.encode()) == value
        finally:
            fastjson._orjson, fastjson._tried = saved


def test_request_shaped_bodies_are_spelled_as_the_standard_library_spells_them(mode: str) -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": 'naïve \u2028 \x00 "quoted" \\ / 日本'},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
        ],
        "temperature": 0.2,
        "stream": True,
        "counts": {1: "one", 2.5: "two and a half"},
    }
    assert fastjson.dumps(body) == stdlib(body)
    nested = {"z": 1, "a": {"y": [3, {"c": 1, "b": 2}]}}
    assert fastjson.dumps(nested, sort_keys=True) == stdlib(nested, sort_keys=True)


def test_what_orjson_cannot_take_gets_the_standard_librarys_answer(mode: str) -> None:
    huge = {"n": 2**70}
    assert fastjson.dumps(huge) == '{"n":1180591620717411303424}'
    assert fastjson.dumps("\ud800") == stdlib("\ud800")  # a lone surrogate stays as it was
    with pytest.raises(UnicodeEncodeError):
        fastjson.dumpb("\ud800")  # and cannot become UTF-8, as before

    @dataclasses.dataclass
    class Point:
        x: int

    for value in (Point(1), datetime.datetime(2026, 1, 1), object()):
        with pytest.raises(TypeError, match="not JSON serializable"):
            fastjson.dumps(value)


def test_text_that_is_not_json_raises_the_standard_librarys_error(mode: str) -> None:
    with pytest.raises(json.JSONDecodeError) as caught:
        fastjson.loads('{"a": 1,')
    assert caught.value.pos == 8
    assert fastjson.loads('{"a": NaN}')["a"] != fastjson.loads('{"a": NaN}')["a"]  # NaN reads
    with pytest.raises(ValueError, match="constant"):
        fastjson.loads("[Infinity]", parse_constant=_refuse)
    # the one documented difference: past 64 bits orjson reads a float
    expected = 10**22 if mode == "standard library" else 1e22
    assert type(fastjson.loads("10000000000000000000000")) is type(expected)


def _refuse(name: str) -> Any:
    raise ValueError(f"constant {name}")


def test_without_orjson_the_standard_library_does_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fastjson, "_orjson", None)
    monkeypatch.setattr(fastjson, "_tried", False)
    monkeypatch.setitem(sys.modules, "orjson", None)  # what an import of a missing module meets
    fastjson.warm()
    assert fastjson._orjson is None
    assert fastjson.dumps({"a": [1, "é"]}) == '{"a":[1,"é"]}'
    assert fastjson.loads(b'{"a": 1}') == {"a": 1}


def test_importing_talaria_does_not_load_orjson() -> None:
    import subprocess

    code = "import sys, talaria, talaria.agent; print('orjson' in sys.modules)"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert shown.stdout.strip() == "False", shown.stderr
