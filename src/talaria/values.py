"""`frozen` and `mutable`: talaria's dataclasses, at half of what `dataclass` costs to create.

`dataclasses.dataclass` writes every method it generates as source text and `exec`s it. On
Python 3.11 that is most of the cost of a class (0.6 ms for a plain one, 1.2 ms for a frozen
one on a small VM), and a one-shot creates about seventy before its first request. These
decorators make real dataclasses (`fields`, `replace`, `asdict`, pattern matching and type
checkers see no difference) but leave only `__init__`, and a frozen class's `__setattr__` and
`__delattr__`, to `dataclass`. Equality, the hash and the repr are written once, here, and
behave as the generated ones do: the compared fields as one tuple, and only between instances
of the same class; a hash of the hashed fields for a frozen class and none for a mutable one;
the fields with `repr=True`, safe against cycles. A method the class defines itself is kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import field
from operator import attrgetter
from reprlib import recursive_repr
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")

Getter = Callable[[Any], tuple[Any, ...]]


@overload
def frozen(cls: type[T], /) -> type[T]: ...


@overload
def frozen(*, slots: bool = False, kw_only: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def frozen(
    cls: type[T] | None = None, /, *, slots: bool = False, kw_only: bool = False
) -> type[T] | Callable[[type[T]], type[T]]:
    """An immutable dataclass: `@dataclass(frozen=True)`, equal and hashed by its fields."""

    def make(target: type[T]) -> type[T]:
        return _dataclass(target, immutable=True, slots=slots, kw_only=kw_only, eq=True)

    return make if cls is None else make(cls)


@overload
def mutable(cls: type[T], /) -> type[T]: ...


@overload
def mutable(
    *, slots: bool = False, kw_only: bool = False, eq: bool = True
) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(field,))
def mutable(
    cls: type[T] | None = None, /, *, slots: bool = False, kw_only: bool = False, eq: bool = True
) -> type[T] | Callable[[type[T]], type[T]]:
    """A mutable dataclass: `@dataclass`, equal by its fields (eq=False: by identity)."""

    def make(target: type[T]) -> type[T]:
        return _dataclass(target, immutable=False, slots=slots, kw_only=kw_only, eq=eq)

    return make if cls is None else make(cls)


def _dataclass(cls: type[T], *, immutable: bool, slots: bool, kw_only: bool, eq: bool) -> type[T]:
    own = dict(cls.__dict__)
    made = dataclasses.dataclass(
        frozen=immutable, slots=slots, kw_only=kw_only, repr=False, eq=False
    )(cls)
    fields = dataclasses.fields(made)  # type: ignore[arg-type]
    shown = tuple(f.name for f in fields if f.repr)
    attributes: dict[str, Any] = {
        "_value_shown": shown,
        "_value_compared": staticmethod(_getter([f.name for f in fields if f.compare])),
        "_value_hashed": staticmethod(
            _getter([f.name for f in fields if (f.compare if f.hash is None else f.hash)])
        ),
    }
    if "__repr__" not in own:
        attributes["__repr__"] = _repr
    if eq:
        if "__eq__" not in own:
            attributes["__eq__"] = _eq
        explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
        if not explicit_hash:
            attributes["__hash__"] = _hash if immutable else None
    for name, attribute in attributes.items():
        setattr(made, name, attribute)
    return made


def _getter(names: list[str]) -> Getter:
    """The named attributes of an object as one tuple."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        only = attrgetter(names[0])
        return lambda obj: (only(obj),)
    return lambda obj: ()


@recursive_repr()
def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._value_shown)
    return f"{type(self).__qualname__}({shown})"


def _eq(self: Any, other: Any) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    compared: Getter = self._value_compared
    return compared(self) == compared(other)


def _hash(self: Any) -> int:
    hashed: Getter = self._value_hashed
    return hash(hashed(self))
