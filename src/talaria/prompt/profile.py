"""The lean prompt profile: what a small local model with a small window is sent.

A 0.5B-8B model on a CPU server spends most of its first turn reading the prompt: the full
system prompt and a dozen tool schemas are ~2.4k tokens, a minute of prompt processing and a
good part of an 8k window. The lean profile sends a short system prompt and only the core
tools (terminal and files) with one-line descriptions and no parameter prose.

`prompt.profile`: "auto" (lean when the served window is under `prompt.lean_below` tokens),
"lean" or "full".
"""

from __future__ import annotations

import copy
from typing import Any

PROFILES = ("auto", "full", "lean")
LEAN_BELOW = 16_384
LEAN_TOOLS = frozenset({"terminal", "read_file", "write_file", "patch", "search_files"})
"""The built-in tools a lean prompt keeps (tools the user passed in are always kept)."""
LEAN_IDENTITY = (
    "You are talaria, a coding agent in the user's environment. Use the tools to act; call "
    "one tool at a time with exactly the arguments its schema names. Answer briefly."
)
LEAN_CONTEXT_FILE_LIMIT = 2_000


def choose_profile(setting: str, window: int | None, lean_below: int = LEAN_BELOW) -> str:
    """ "lean" or "full" for the configured setting and the served window (None: unknown)."""
    if setting not in PROFILES:
        raise ValueError(f"prompt.profile must be one of {', '.join(PROFILES)}, got {setting!r}")
    if setting != "auto":
        return setting
    return "lean" if window is not None and window < lean_below else "full"


def lean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with the description cut to its first sentence and no parameter prose."""
    lean = copy.deepcopy(schema)
    function = lean.get("function", {})
    function["description"] = first_sentence(str(function.get("description") or ""))
    _drop_descriptions(function.get("parameters"))
    return lean


def first_sentence(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    for end in (". ", "; "):
        cut = line.find(end)
        if 0 < cut < limit:
            return line[: cut + 1]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _drop_descriptions(node: Any) -> None:
    if isinstance(node, dict):
        properties = node.get("properties")
        if isinstance(properties, dict):
            for prop in properties.values():
                if isinstance(prop, dict):
                    prop.pop("description", None)
                    prop.pop("examples", None)
                    _drop_descriptions(prop)
        _drop_descriptions(node.get("items"))
