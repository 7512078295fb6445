"""JSON on the hot path: orjson once it is loaded, the standard library before and where
orjson cannot.

Every step encodes the whole request body and decodes each streamed event, the tool
arguments and the stored rows; the standard library takes about ten times as long for the
body. The output is the compact UTF-8 JSON that `json.dumps(..., ensure_ascii=False,
separators=(",", ":"))` writes. A value orjson refuses (an integer over 64 bits, a lone
surrogate, a type it does not know) and text it cannot read (NaN, Infinity) go to the
standard library, so callers see its errors, as before. One difference stays: an integer
beyond 64 bits is read as a float (as most parsers do), so code that needs such integers
exactly, like the check of a tool's arguments, keeps `json.loads`.

Importing orjson takes about 9 ms (it loads `uuid` and `platform`), so it is not imported
with talaria: a model client calls `warm` once its first streamed answer has begun (a
non-streaming one, once its first answer is back), and what runs before that, the first
request included, uses the standard library.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

_orjson: ModuleType | None = None
_tried = False
_OPTIONS = 0
_SORTED = 0


def warm() -> None:
    """Load orjson for every later call (idempotent, cheap after the first). Where it is
    missing (talaria installed without its dependencies), the standard library does the
    work."""
    global _orjson, _OPTIONS, _SORTED, _tried
    if _tried:
        return
    _tried = True
    try:
        import orjson
    except ImportError:
        return

    # keys as the standard library spells them; dataclasses and datetimes are not JSON
    # values there, so they are not here either
    _OPTIONS = (
        orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
    )
    _SORTED = _OPTIONS | orjson.OPT_SORT_KEYS
    _orjson = orjson


def dumpb(value: Any, *, sort_keys: bool = False) -> bytes:
    """`value` as compact UTF-8 JSON bytes; TypeError or ValueError as `json.dumps` raises."""
    fast = _fast(value, sort_keys)
    return fast if fast is not None else _stdlib(value, sort_keys).encode()


def dumps(value: Any, *, sort_keys: bool = False) -> str:
    """`value` as compact JSON text; TypeError or ValueError as `json.dumps` raises."""
    fast = _fast(value, sort_keys)
    return fast.decode() if fast is not None else _stdlib(value, sort_keys)


def loads(text: str | bytes, **stdlib: Any) -> Any:
    """The value of JSON `text`; what orjson cannot read is read by `json.loads(text,
    **stdlib)`, which raises `json.JSONDecodeError` for text that is not JSON."""
    if _orjson is not None:
        try:
            return _orjson.loads(text)
        except _orjson.JSONDecodeError:
            pass
    return json.loads(text, **stdlib)


def _fast(value: Any, sort_keys: bool) -> bytes | None:
    """orjson's bytes for `value`; None when it is not loaded or refuses the value."""
    if _orjson is None:
        return None
    try:
        encoded: bytes = _orjson.dumps(value, option=_SORTED if sort_keys else _OPTIONS)
    except TypeError:
        return None
    return encoded


def _stdlib(value: Any, sort_keys: bool) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys)
