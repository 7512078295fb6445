"""Events are immutable values: equal when their fields are, hashable when their fields are,
and shown as a dataclass shows itself, whatever writes those methods."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import pytest

import talaria.events as ev

EVENT_CLASSES = list(typing.get_args(ev.Event))
SAMPLES: dict[type, Any] = {str: "x", int: 3, float: 1.5, bool: True}


def _example(cls: type, nudge: int = 0) -> Any:
    values = {}
    for field in dataclasses.fields(cls):
        kind = typing.get_type_hints(cls)[field.name]
        origin = typing.get_origin(kind) or kind
        if origin in SAMPLES:
            value: Any = SAMPLES[origin]
            values[field.name] = value * 2 if nudge and isinstance(value, str | int) else value
        elif origin is dict:
            values[field.name] = {"k": nudge}
        elif origin in (list, tuple):
            values[field.name] = origin(["a"] * (nudge + 1))
        else:  # str | None and the like
            values[field.name] = "y" * (nudge + 1)
    return cls(**values)


def test_every_event_of_the_protocol_is_covered() -> None:
    assert len(EVENT_CLASSES) == 22


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.__name__)
def test_an_event_is_an_immutable_value(cls: type) -> None:
    event, same, other = _example(cls), _example(cls), _example(cls, nudge=1)
    assert event == same
    assert event != other
    assert dataclasses.replace(event) == event
    assert (event == object()) is False
    name = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(event, name, "changed")
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(event, name)
    assert dataclasses.asdict(event) == dataclasses.asdict(same)


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.__name__)
def test_an_event_shows_and_hashes_as_a_generated_dataclass_would(cls: type) -> None:
    generated = dataclasses.dataclass(frozen=True)(
        type(cls.__name__, (), {"__annotations__": dict(cls.__annotations__)})
    )
    event = _example(cls)
    twin = generated(**{f.name: getattr(event, f.name) for f in dataclasses.fields(cls)})
    assert repr(event).replace(cls.__qualname__, cls.__name__) == repr(twin)
    try:
        expected = hash(twin)
    except TypeError:  # a dict or list field: unhashable, as the generated one is
        with pytest.raises(TypeError):
            hash(event)
    else:
        assert hash(event) == expected
        assert len({event, _example(cls)}) == 1
