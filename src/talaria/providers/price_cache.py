"""The catalogue's prices, as `pricing` reads them, kept on disk from one process to the next.

Importing `genai-prices` costs about a quarter of a second (pydantic, its data, an HTTP client
for its updater), and every process paid it to price its first call, a one-shot after its
answer was already on the screen. The linear prices `pricing` derives, and the models the
catalogue does not know, are stored in the user's cache (`talaria.user_cache`,
``prices.json``) under the identity of the installed catalogue (its data file's path, size and
time), so a new release of the catalogue starts afresh. A price the catalogue replaces on a
later date is stored until that date; one that depends on the hour of the day is asked of the
catalogue by every process. When the file cannot be read or written, prices are asked of the
catalogue as before.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from talaria import user_cache

FILE = "prices.json"

UNKNOWN = "unknown"
"""Stored for a model the catalogue has no price for."""
SLOW = "slow"
"""Stored for a model whose price is not linear: the catalogue prices each of its calls."""

Entry = tuple[float, tuple[float, float, float, float], float] | str
"""(fee, per-token prices of input, cache read, cache write and output, valid below this many
tokens), or UNKNOWN, or SLOW."""

_lock = threading.Lock()
_entries: dict[str, Any] | None = None
_identity: str | None = None


def lookup(key: str) -> Entry | None:
    """What is stored for `key` ("provider/model") for the installed catalogue and still in
    force now, else None."""
    with _lock:
        found = _loaded().get(key)
    if not isinstance(found, dict):
        return None
    before = found.get("before")
    if isinstance(before, int | float) and time.time() >= before:
        return None  # a price the catalogue dates from then on is in force
    if found.get("unknown") is True:
        return UNKNOWN
    if found.get("slow") is True:
        return SLOW
    try:
        fee, fresh, read, written, output, below = (
            float("inf") if number is None else float(number) for number in found["price"]
        )
    except (KeyError, TypeError, ValueError):
        return None
    return fee, (fresh, read, written, output), below


def remember(key: str, entry: Entry, before: float | None = None) -> None:
    """Store `entry` for `key` until the time `before` (None: while this catalogue is
    installed), merged into what other processes stored meanwhile."""
    stored: dict[str, Any] = {"before": before}
    if isinstance(entry, tuple):
        fee, rates, below = entry
        stored["price"] = [fee, *rates, None if below == float("inf") else below]
    else:
        stored["unknown" if entry == UNKNOWN else "slow"] = True
    with _lock:
        entries = _loaded()
        entries.update(_read(_identity) or {})
        entries[key] = stored
        _write(entries)


def forget() -> None:
    """Drop what this process read (the next lookup reads the file again)."""
    global _entries, _identity
    with _lock:
        _entries, _identity = None, None


def _loaded() -> dict[str, Any]:
    global _entries, _identity
    if _entries is None:
        _identity = _catalogue()
        _entries = (_read(_identity) if _identity else None) or {}
    return _entries


def _catalogue() -> str | None:
    """The installed catalogue's identity, found without importing it; None without one."""
    from importlib.util import find_spec

    try:
        spec = find_spec("genai_prices")
        if spec is None or spec.origin is None:
            return None
        data = Path(spec.origin).with_name("data.py")
        stat = data.stat()
    except (ImportError, ValueError, OSError):
        return None
    return f"{data}:{stat.st_size}:{stat.st_mtime_ns}"


def _read(identity: str | None) -> dict[str, Any] | None:
    stored = user_cache.read(FILE)
    if stored is None or stored.get("catalogue") != identity:
        return None
    prices = stored.get("prices")
    return prices if isinstance(prices, dict) else None


def _write(entries: dict[str, Any]) -> None:
    if _identity is not None:
        user_cache.write(FILE, {"catalogue": _identity, "prices": entries})
