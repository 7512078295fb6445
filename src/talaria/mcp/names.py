"""Tool names every wire API accepts: `mcp__<server>__<tool>`, ^[a-zA-Z0-9_-]{1,64}$.

Characters outside that set become `_`; a name over 64 characters keeps its head and gains a
hash of the full original; two tools that end up with the same name are told apart by the same
kind of hash, so the result depends only on the names and their order, never on chance.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

MAX_LENGTH = 64
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_HASH_LENGTH = 8


def sanitise(part: str) -> str:
    return _UNSAFE.sub("_", part) or "_"


def _digest(original: str) -> str:
    return hashlib.sha256(original.encode()).hexdigest()[:_HASH_LENGTH]


def _fit(name: str, original: str) -> str:
    if len(name) <= MAX_LENGTH:
        return name
    return f"{name[: MAX_LENGTH - _HASH_LENGTH - 1]}_{_digest(original)}"


def tool_name(server: str, tool: str) -> str:
    """The name the model sees for one server tool (before collisions are resolved)."""
    return _fit(f"mcp__{sanitise(server)}__{sanitise(tool)}", _original(server, tool))


def _original(server: str, tool: str, salt: int = 0) -> str:
    return "\0".join([server, tool, *([str(salt)] if salt else [])])


def assign_names(pairs: Iterable[tuple[str, str]], taken: Iterable[str] = ()) -> list[str]:
    """Names for (server, tool) pairs, unique among themselves and against `taken`; the first
    pair to claim a name keeps it, later ones get a hash suffix of their original names."""
    used = set(taken)
    names = []
    for server, tool in pairs:
        name = tool_name(server, tool)
        salt = 0
        while name in used:
            salt += 1
            base = tool_name(server, tool)[: MAX_LENGTH - _HASH_LENGTH - 1]
            name = f"{base}_{_digest(_original(server, tool, salt))}"
        used.add(name)
        names.append(name)
    return names
