"""Changing config.yaml without losing what the user wrote there: comments, blank lines, key
order, quoting, anchors and indentation stay as they were; only the entry that changes is
written anew. ruamel.yaml's round-trip mode does the editing (PyYAML would drop every
comment); reading settings stays with PyYAML (`config.read_config_file`), which is faster and
checks the file's shape before anything is rewritten.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from talaria.config import read_config_file
from talaria.config_schema import ConfigError

WIDTH = 4096
"""Long lines are kept as they are, not folded."""


def set_config_value(path: Path, dotted: str, value: Any) -> None:
    """Write one dotted key, keeping the rest of the file."""
    set_config_entry(path, dotted.split("."), value)


def set_config_entry(path: Path, keys: Sequence[str], value: Any) -> None:
    """Write the entry at `keys` (a name may hold dots: an MCP server's, say)."""

    def put(document: Any) -> None:
        _parent(document, keys, create=True)[keys[-1]] = value

    edit_config(path, put)


def remove_config_entry(path: Path, keys: Sequence[str]) -> None:
    """Remove the entry at `keys` (nothing happens when there is none), and the mappings that
    held only it."""

    def drop(document: Any) -> None:
        for depth in range(len(keys), 0, -1):
            parent = _parent(document, keys[:depth], create=False)
            if parent is None:
                return
            parent.pop(keys[depth - 1], None)
            if parent or depth == 1:
                return

    edit_config(path, drop)


def add_to_config_list(path: Path, dotted: str, item: Any) -> None:
    """Append `item` to a list key unless it is there, re-reading the file under an exclusive
    lock so that concurrent writers (two agents granting "always") never drop each other's."""
    keys = dotted.split(".")

    def append(document: Any) -> None:
        parent = _parent(document, keys, create=True)
        current = parent.get(keys[-1])
        if not isinstance(current, list):
            parent[keys[-1]] = current = []
        if item not in current:
            _append(current, item)

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".yaml.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        edit_config(path, append)


def edit_config(path: Path, edit: Callable[[Any], None]) -> None:
    """Load `path` for a round trip, let `edit` change the document, write it back in one
    atomic step. A file talaria cannot read is refused (`ConfigError`), never rewritten."""
    from ruamel.yaml import YAML, CommentedMap

    read_config_file(path)  # not YAML, not a mapping, too large, an alias bomb: refused here
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = WIDTH
    if text.strip():
        mapping, sequence, offset = _layout(text)
        yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    document = yaml.load(text) if text.strip() else None
    if document is None:
        document = CommentedMap()
    edit(document)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".yaml.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as out:
            yaml.dump(document, out)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"{path}: cannot be written: {exc.strerror or exc}") from None


def _append(items: list[Any], item: Any) -> None:
    """Append to a loaded list, keeping the blank lines and comments that followed its last
    item after the new one (ruamel keeps them with the item they follow)."""
    import copy

    last = len(items) - 1
    items.append(item)
    notes = getattr(items, "ca", None)
    entry = notes.items.get(last) if notes is not None else None
    token = entry[0] if entry else None
    if notes is None or token is None:
        return
    own, newline, after = token.value.partition("\n")
    if not newline or not after:
        return
    moved = copy.copy(token)
    moved.value = "\n" + after
    if own.strip():
        token.value = own + "\n"
    else:
        del notes.items[last]
    notes.items[last + 1] = [moved, None, None, None]


def _layout(text: str) -> tuple[int, int, int]:
    """The file's indentation, as ruamel's `indent(mapping, sequence, offset)` takes it: how
    far a nested key is indented, how far a list item's text, and where its dash goes."""
    from ruamel.yaml.util import load_yaml_guess_indent

    _, sequence, offset = load_yaml_guess_indent(text)  # the list's, when the file has one
    nested_keys = [
        len(line) - len(stripped)
        for line in text.splitlines()
        if line.startswith(" ")
        and (stripped := line.lstrip(" "))
        and stripped[0] not in "#-"
        and ":" in stripped
    ]
    mapping = min(nested_keys, default=2)
    if sequence is None or offset is None:
        offset = max(0, mapping - 2)
        sequence = offset + 2
    return mapping, sequence, offset


def _parent(document: Any, keys: Sequence[str], *, create: bool) -> Any:
    """The mapping that holds the last of `keys` (made on the way when `create`)."""
    from ruamel.yaml import CommentedMap

    node = document
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            if not create:
                return None
            child = CommentedMap()
            node[key] = child
        node = child
    return node
