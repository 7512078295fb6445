"""An adapter's part of `gateway.platforms.<name>`, read into its settings dataclass.

The mapping also holds the gateway's own keys for that platform (type, allowlists, busy
mode, ...); an adapter takes only the fields its dataclass declares and leaves the rest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")


def read_settings(
    cls: type[T],
    settings: Mapping[str, Any],
    platform: str,
    required: Sequence[str],
    choices: Mapping[str, Sequence[str]] | None = None,
) -> T:
    """`cls(**settings)` for the keys `cls` knows; a missing required value or a value outside
    its `choices` is a `ValueError` that names the platform and the key."""
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    values = {key: value for key, value in settings.items() if key in known}
    for name in required:
        if not values.get(name):
            raise ValueError(f"{platform}: `{name}` is required")
    for name, allowed in (choices or {}).items():
        if name in values and values[name] not in allowed:
            raise ValueError(f"{platform}: `{name}` is one of {', '.join(allowed)}")
    return cls(**values)
