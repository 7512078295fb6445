"""Finds plugins and lets them register hooks and tools.

A plugin is a module (or object) with a `register(bus)` function. They come from the
`talaria.plugins` entry-point group, from `*.py` files in the home's `plugins/` folder, and from
`Agent(plugins=[...])`. A plugin that fails to load (it does not import, has a syntax error,
calls `sys.exit`, or its `register` raises) is skipped with one warning that names it and the
reason: a `PluginFailure` for the caller to show (the agent emits it as a `Notice`) and one
line on the `talaria.plugins.load` logger (the CLI prints it on stderr), once per process
however many agents load it. A plugin the
configuration names in `plugins.required` (a guard the user relies on) that fails to load or is
not found stops the agent instead: a `ConfigError`, so nothing runs unguarded.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from talaria.config_schema import ConfigError
from talaria.plugins.entry_points import entry_points
from talaria.plugins.hooks import HookBus

log = logging.getLogger("talaria.plugins.load")

ENTRY_POINT_GROUP = "talaria.plugins"


@dataclass(frozen=True, slots=True)
class PluginFailure:
    """A plugin that did not load, and why, in words."""

    name: str
    reason: str

    @property
    def message(self) -> str:
        return f"plugin {self.name} failed to load ({self.reason}); skipped"


_logged: set[PluginFailure] = set()
"""Failures already on the log: each one is logged once per process, while every agent still
emits its own `Notice` (each front end's stream shows it)."""


@dataclass(frozen=True, slots=True)
class _Found:
    """A plugin that imported, under the name it is known by (entry point or file name)."""

    name: str
    plugin: Any


def load_plugins(
    bus: HookBus, home: Path, explicit: Iterable[Any] = (), required: Sequence[str] = ()
) -> list[PluginFailure]:
    """Register every plugin found; returns those that failed (each logged once). Raises
    `ConfigError` when a plugin named in `required` failed or was not found."""
    found, failures = _entry_point_plugins()
    home_found, home_failures = _home_plugins(home / "plugins")
    failures = [*failures, *home_failures]
    loaded: list[str] = []
    for item in [*found, *home_found, *(_Found(repr(p), p) for p in explicit)]:
        try:
            plugin = item.plugin
            register = (
                plugin if callable(plugin) and not hasattr(plugin, "register") else plugin.register
            )
            register(bus)
        except BaseException as exc:  # sys.exit() in register() must not end the process
            failures.append(_failed(item.name, "register() failed", exc))
            continue
        loaded.append(item.name)
    _check_required(required, loaded, failures)  # its error is the one line, no warning
    for failure in failures:
        if failure not in _logged:  # a server builds an agent per request: say it once
            _logged.add(failure)
            log.warning("%s", failure.message)
    return failures


def _check_required(
    required: Sequence[str], loaded: list[str], failures: list[PluginFailure]
) -> None:
    for name in required:
        failed = next((f for f in failures if _same_plugin(f.name, name)), None)
        if failed is not None:
            raise ConfigError(
                f"plugins.required: plugin {name} failed to load ({failed.reason}); "
                "not running without it"
            )
        if not any(_same_plugin(have, name) for have in loaded):
            raise ConfigError(
                f"plugins.required: plugin {name} was not found (no entry point of that name "
                "and no plugins/<name>.py in the home); not running without it"
            )


def _same_plugin(have: str, wanted: str) -> bool:
    """An entry point by its name, a home plugin by its file name with or without `.py`."""
    return have == wanted or have == f"{wanted}.py"


@functools.cache
def _entry_point_plugins() -> tuple[list[_Found], list[PluginFailure]]:
    """Scanned once per process: the installed distributions do not change under us, and the
    scan costs every new agent milliseconds (read without `importlib.metadata`, see
    `entry_points`). A failure is kept too, so every agent of the process reports it."""
    found: list[_Found] = []
    failures: list[PluginFailure] = []
    for entry in entry_points(ENTRY_POINT_GROUP):
        try:
            found.append(_Found(entry.name, entry.load()))
        except BaseException as exc:  # an import that calls sys.exit() included
            failures.append(_failed(entry.name, "import failed", exc))
    return found, failures


def _home_plugins(folder: Path) -> tuple[list[_Found], list[PluginFailure]]:
    if not folder.is_dir():
        return [], []
    import importlib.util  # only a home with a plugins folder needs it

    found: list[_Found] = []
    failures: list[PluginFailure] = []
    for path in sorted(folder.glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"talaria_plugin_{path.stem}", path)
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:  # an import that calls sys.exit() included
            failures.append(_failed(path.name, "import failed", exc))
            continue
        found.append(_Found(path.name, module))
    return found, failures


def _failed(name: str, stage: str, exc: BaseException) -> PluginFailure:
    log.debug("plugin %s: %s", name, stage, exc_info=exc)  # the traceback, for its author
    return PluginFailure(name, f"{stage}: {_reason(exc)}")


def _reason(exc: BaseException) -> str:
    """The failure in words (a plugin's author reads it; the traceback is in the debug log)."""
    if isinstance(exc, SyntaxError):
        return f"syntax error at line {exc.lineno}: {exc.msg}"
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    if isinstance(exc, KeyboardInterrupt):
        return "it raised an interrupt"
    try:
        text = str(exc).strip()
    except Exception:  # an exception whose own __str__ fails
        text = ""
    return text or "no reason given"
