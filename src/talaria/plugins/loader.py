"""Finds plugins and lets them register hooks and tools.

A plugin is a module (or object) with a `register(bus)` function. They come from the
`talaria.plugins` entry-point group, from `*.py` files in the home's `plugins/` folder, and from
`Agent(plugins=[...])`. A plugin that fails to load is logged and skipped.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from talaria.plugins.entry_points import entry_points
from talaria.plugins.hooks import HookBus

log = logging.getLogger("talaria.plugins")

ENTRY_POINT_GROUP = "talaria.plugins"


def load_plugins(bus: HookBus, home: Path, explicit: Iterable[Any] = ()) -> list[str]:
    """Register every plugin found; returns the names of those that loaded."""
    loaded: list[str] = []
    for name, plugin in [
        *_entry_point_plugins(),
        *_home_plugins(home / "plugins"),
        *((repr(p), p) for p in explicit),
    ]:
        try:
            register = (
                plugin if callable(plugin) and not hasattr(plugin, "register") else plugin.register
            )
            register(bus)
        except Exception:
            log.exception("plugin %s failed to load; skipped", name)
            continue
        loaded.append(name)
    return loaded


@functools.cache
def _entry_point_plugins() -> list[tuple[str, Any]]:
    """Scanned once per process: the installed distributions do not change under us, and the
    scan costs every new agent milliseconds (read without `importlib.metadata`, see
    `entry_points`)."""
    found = []
    for entry in entry_points(ENTRY_POINT_GROUP):
        try:
            found.append((entry.name, entry.load()))
        except Exception:
            log.exception("plugin entry point %s failed to import; skipped", entry.name)
    return found


def _home_plugins(folder: Path) -> list[tuple[str, Any]]:
    if not folder.is_dir():
        return []
    import importlib.util  # only a home with a plugins folder needs it

    found = []
    for path in sorted(folder.glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"talaria_plugin_{path.stem}", path)
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception:
            log.exception("plugin file %s failed to import; skipped", path)
            continue
        found.append((path.name, module))
    return found
