"""`frozen` and `mutable` make classes that behave as `dataclasses.dataclass` makes them:
the same equality, hash, repr and frozenness, field options and own methods included."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import field
from typing import Any

import pytest

from talaria.values import frozen, mutable

Maker = Callable[[type], type]

PAIRS: dict[str, tuple[Maker, Maker]] = {
    "frozen": (frozen, dataclasses.dataclass(frozen=True)),
    "frozen, slots": (frozen(slots=True), dataclasses.dataclass(frozen=True, slots=True)),
    "frozen, kw_only": (frozen(kw_only=True), dataclasses.dataclass(frozen=True, kw_only=True)),
    "mutable": (mutable, dataclasses.dataclass),
    "mutable, slots": (mutable(slots=True), dataclasses.dataclass(slots=True)),
    "mutable, eq=False": (mutable(eq=False), dataclasses.dataclass(eq=False)),
}


def shapes() -> dict[str, dict[str, Any]]:
    """Class bodies, each made once by talaria and once by `dataclass`."""
    return {
        "no fields": {"__annotations__": {}},
        "one field": {"__annotations__": {"a": "int"}},
        "defaults": {"__annotations__": {"a": "int", "b": "str", "c": "tuple"}, "b": "x", "c": ()},
        "field options": {
            "__annotations__": {"a": "int", "hidden": "str", "loose": "float", "unhashed": "int"},
            "hidden": field(default="secret", repr=False),
            "loose": field(default=0.0, compare=False),
            "unhashed": field(default=7, hash=False),
        },
        "a factory": {
            "__annotations__": {"a": "int", "items": "list"},
            "items": field(default_factory=list),
        },
    }


def both(pair: str, shape: str) -> tuple[type, type]:
    ours, theirs = PAIRS[pair]
    return ours(type("Made", (), dict(shapes()[shape]))), theirs(
        type("Made", (), dict(shapes()[shape]))
    )


def build(cls: type, nudge: int = 0, **given: Any) -> Any:
    values = {"a": 1 + nudge, "b": "y" * (nudge + 1), "c": (nudge,), "loose": float(nudge)}
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    return cls(**{k: v for k, v in {**values, **given}.items() if k in names})


CASES = [(pair, shape) for pair in PAIRS for shape in shapes()]


@pytest.mark.parametrize(("pair", "shape"), CASES)
def test_equality_hash_and_repr_are_the_generated_ones(pair: str, shape: str) -> None:
    ours, theirs = both(pair, shape)
    for left, right in [(0, 0), (0, 1), (1, 0)]:
        ours_equal = build(ours, left) == build(ours, right)
        assert ours_equal == (build(theirs, left) == build(theirs, right))
        assert (build(ours, left) != build(ours, right)) == (not ours_equal)
    assert repr(build(ours)).replace(ours.__qualname__, "T") == repr(build(theirs)).replace(
        theirs.__qualname__, "T"
    )
    assert (ours.__hash__ is None) == (theirs.__hash__ is None)
    if ours.__hash__ is not None and "items" not in ours.__dataclass_fields__:
        same = [build(ours), build(ours)]
        assert (hash(same[0]) == hash(same[1])) == (same[0] == same[1])
        if theirs.__hash__ is not object.__hash__:
            assert hash(build(ours)) == hash(build(theirs))


@pytest.mark.parametrize(("pair", "shape"), CASES)
def test_the_dataclass_api_sees_a_dataclass(pair: str, shape: str) -> None:
    ours, theirs = both(pair, shape)
    made = build(ours)
    assert dataclasses.is_dataclass(ours)
    assert [f.name for f in dataclasses.fields(ours)] == [
        f.name for f in dataclasses.fields(theirs)
    ]
    assert dataclasses.asdict(made) == dataclasses.asdict(build(theirs))
    assert getattr(ours, "__match_args__", ()) == getattr(theirs, "__match_args__", ())
    if dataclasses.fields(ours) and "kw_only" not in pair:
        assert dataclasses.replace(made, a=5).a == 5
    assert hasattr(made, "__dict__") == hasattr(build(theirs), "__dict__")  # slots or not


@pytest.mark.parametrize("maker", [frozen, frozen(slots=True)])
def test_a_frozen_value_cannot_change(maker: Maker) -> None:
    point = maker(type("Point", (), {"__annotations__": {"x": "int"}}))(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        del point.x
    assert point.x == 1


def test_values_of_different_classes_are_never_equal() -> None:
    @frozen
    class Base:
        a: int

    class Sub(Base):
        pass

    assert Base(1) != Sub(1)
    assert (Base(1) == 1) is False
    assert Base(1).__eq__(Sub(1)) is NotImplemented


def test_the_same_nan_object_is_equal_as_in_a_generated_tuple_comparison() -> None:
    nan = math.nan
    Ours = frozen(type("P", (), {"__annotations__": {"x": "float", "y": "float"}}))
    Theirs = dataclasses.dataclass(frozen=True)(
        type("P", (), {"__annotations__": {"x": "float", "y": "float"}})
    )
    assert (Ours(nan, 1.0) == Ours(nan, 1.0)) == (Theirs(nan, 1.0) == Theirs(nan, 1.0))
    assert (Ours(float("nan"), 1.0) == Ours(float("nan"), 1.0)) is False


def test_a_method_the_class_writes_itself_is_kept() -> None:
    @frozen
    class Named:
        name: str
        note: str = ""

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Named) and self.name == other.name

        def __hash__(self) -> int:
            return hash(self.name)

        def __repr__(self) -> str:
            return f"<{self.name}>"

    assert Named("a", "x") == Named("a", "y")
    assert len({Named("a", "x"), Named("a", "y")}) == 1
    assert repr(Named("a")) == "<a>"


def test_a_class_with_its_own_eq_and_no_hash_is_unhashable_as_with_dataclass() -> None:
    body = {
        "__annotations__": {"a": "int"},
        "__eq__": lambda self, other: True,
    }
    ours = frozen(type("E", (), dict(body)))
    theirs = dataclasses.dataclass(frozen=True)(type("E", (), dict(body)))
    assert (ours.__hash__ is None) == (theirs.__hash__ is None)


def test_a_cycle_shows_as_dots_instead_of_recursing() -> None:
    @mutable
    class Node:
        name: str
        next: Any = None

    node = Node("a")
    node.next = node
    assert (
        repr(node)
        == "test_a_cycle_shows_as_dots_instead_of_recursing.<locals>.Node(name='a', next=...)"
    )


def test_mutable_eq_false_compares_by_identity() -> None:
    @mutable(eq=False)
    class Holder:
        items: list = field(default_factory=list)

    one = Holder()
    assert one == one
    assert Holder() != Holder()
    assert len({Holder(), Holder()}) == 2
