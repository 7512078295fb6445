"""The settings as they may be shown (`talaria config show`): every secret masked.

Secrets are found by the schema (`Rule.secret` in `config_schema`), not by how keys are named:
every value under an MCP server's `env` and `headers`, the API key, key command and client
headers of every model entry (model, providers, fallback_providers, auxiliary, their own
fallbacks), the server's key, whatever the keys inside are called. A password in a URL
(`postgresql://user:password@host/db`) is masked wherever it appears. Keys the schema does not
know at all (a newer version's, a plugin's) are masked when their name says secret: a
backstop, not the rule.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from talaria.config_schema import SCHEMA, SECTIONS

MASK = "…"
_NAME_MARKERS = ("key", "token", "secret", "password", "authorization", "credential")


def mask_value(value: Any) -> Any:
    """A secret as shown: its last four characters when it is long enough to keep them."""
    if isinstance(value, str) and len(value) > 8:
        return MASK + value[-4:]
    return MASK


def masked(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of nested settings with every secret masked."""
    shown = copy.deepcopy(data)
    for key, rule in SCHEMA.items():
        *parents, leaf = key.split(".")
        node = _at(shown, parents)
        if isinstance(node, dict) and leaf in node:
            for pattern in rule.secret:
                node[leaf] = _mask_at(node[leaf], pattern.split(".") if pattern else [])
    return _backstop(shown, "")


def masked_setting(key: str, value: Any) -> Any:
    """One setting (a dotted key and its value) as it may be shown."""
    nested: dict[str, Any] = {}
    *parents, leaf = key.split(".")
    node = nested
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    return _at(masked(nested), key.split("."))


def _at(data: Any, path: list[str]) -> Any:
    for part in path:
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def _mask_at(value: Any, path: list[str]) -> Any:
    """`value` with what `path` reaches inside it masked (`*`: every key or item)."""
    if not path:
        return None if value is None else mask_value(value)
    head, rest = path[0], path[1:]
    for key in _children(value, head):
        value[key] = _mask_at(value[key], rest)
    return value


def _children(value: Any, head: str) -> Iterator[Any]:
    if isinstance(value, dict):
        yield from (list(value) if head == "*" else [head] if head in value else [])
    elif isinstance(value, list) and head == "*":
        yield from range(len(value))


def _backstop(value: Any, key: str) -> Any:
    """URL passwords everywhere; secret-looking names where the schema knows nothing."""
    if isinstance(value, dict):
        return {name: _backstop(item, f"{key}{name}.") for name, item in value.items()}
    if isinstance(value, list):
        return [_backstop(item, key) for item in value]
    if isinstance(value, str):
        dotted = key.rstrip(".")
        if value and not _known(dotted) and any(m in dotted.lower() for m in _NAME_MARKERS):
            return mask_value(value)
        return _without_password(value)
    return value


def _known(key: str) -> bool:
    """Whether the schema describes `key` (a key it lists, or anything inside one)."""
    parts = key.split(".")
    prefixes = (".".join(parts[:depth]) for depth in range(1, len(parts) + 1))
    return any(prefix in SCHEMA for prefix in prefixes) or key in SECTIONS


def _without_password(text: str) -> str:
    if "://" not in text or "@" not in text:
        return text
    try:
        parts = urlsplit(text)
        password = parts.password
    except ValueError:
        return text
    if not password:
        return text
    return text.replace(f":{password}@", f":{MASK}@", 1)
