"""Where hooks are configured, what the configuration means, and which projects are trusted.

The home's `settings.json` is the user's own configuration and always applies. A project's
`.talaria/settings.json` and `.talaria/settings.local.json` apply only after the user trusted
that project's hooks (`talaria hooks trust`), and only as they were when trusted: the trust
records a digest of both files, so an edited file (a pull, the agent) runs nothing until it is
trusted again. Untrusted project hooks are never started.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from talaria.claude_names import CLAUDE_NAMES

EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PostToolUseFailure",
    "PreCompact",
    "Stop",
    "SubagentStop",
    "SessionEnd",
)
TOOL_EVENTS = frozenset({"PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure"})
"""Events whose matcher is a pattern on the tool's name."""
PROJECT_FILES = (".talaria/settings.json", ".talaria/settings.local.json")
HOME_FILE = "settings.json"
TRUST_FILE = "trusted_hooks.json"


class HookSettingsError(ValueError):
    """A settings file whose hooks cannot be used as written (one line: which file, what)."""


@dataclass(frozen=True, slots=True)
class Handler:
    """One hook: a command (`type: command`) or an HTTP endpoint (`type: http`)."""

    kind: str
    target: str
    """The command line, or the URL."""
    timeout: float
    source: str
    """The settings file it came from."""
    headers: dict[str, str] = field(default_factory=dict)
    allowed_env: tuple[str, ...] = ()
    """Environment variables an HTTP hook's headers may name as $VAR."""

    @property
    def label(self) -> str:
        return self.target if len(self.target) <= 60 else self.target[:57] + "..."


@dataclass(frozen=True, slots=True)
class Group:
    """The handlers of one settings entry, and the tool names its matcher selects."""

    matcher: str
    handlers: tuple[Handler, ...]

    def matches(self, tool_name: str | None) -> bool:
        if tool_name is None or self.matcher in ("", "*"):
            return True
        names = (tool_name, *CLAUDE_NAMES.get(tool_name, ()))
        try:
            pattern = re.compile(self.matcher)
        except re.error:
            return self.matcher == tool_name
        return any(name and pattern.fullmatch(name) for name in names)


@dataclass(frozen=True, slots=True)
class HookSet:
    """Every configured hook, by event."""

    events: dict[str, tuple[Group, ...]] = field(default_factory=dict)

    def handlers(self, event: str, tool_name: str | None = None) -> list[Handler]:
        groups = self.events.get(event, ())
        return [h for g in groups if g.matches(tool_name) for h in g.handlers]

    def has(self, event: str) -> bool:
        return bool(self.events.get(event))

    def merged(self, other: HookSet) -> HookSet:
        events = dict(self.events)
        for name, groups in other.events.items():
            events[name] = (*events.get(name, ()), *groups)
        return HookSet(events)


def parse_hooks(data: Any, source: str, default_timeout: float) -> HookSet:
    """The `hooks` object of a settings file (HookSettingsError when its shape is wrong)."""
    raw = data.get("hooks", {}) if isinstance(data, dict) else None
    if not isinstance(raw, dict):
        raise HookSettingsError(f"{source}: 'hooks' must be an object of events")
    events: dict[str, tuple[Group, ...]] = {}
    for event, groups in raw.items():
        if event not in EVENTS:
            continue  # an event talaria does not have (Notification, ...): not an error
        if not isinstance(groups, list):
            raise HookSettingsError(f"{source}: hooks.{event} must be a list")
        events[event] = tuple(
            _group(g, f"{source}: hooks.{event}", default_timeout) for g in groups
        )
    return HookSet(events)


def _group(raw: Any, where: str, default_timeout: float) -> Group:
    if not isinstance(raw, dict) or not isinstance(raw.get("hooks"), list):
        raise HookSettingsError(f"{where}: each entry needs a 'hooks' list")
    matcher = raw.get("matcher") or ""
    handlers = tuple(_handler(h, where, default_timeout) for h in raw["hooks"])
    return Group(str(matcher), handlers)


def _handler(raw: Any, where: str, default_timeout: float) -> Handler:
    if not isinstance(raw, dict):
        raise HookSettingsError(f"{where}: a hook must be an object")
    kind = raw.get("type", "command")
    key = {"command": "command", "http": "url"}.get(kind)
    if key is None or not isinstance(raw.get(key), str) or not raw[key].strip():
        raise HookSettingsError(
            f"{where}: a hook is {{'type': 'command', 'command': ...}} or "
            f"{{'type': 'http', 'url': ...}}, got {json.dumps(raw)[:80]}"
        )
    timeout = raw.get("timeout", default_timeout)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise HookSettingsError(f"{where}: timeout must be a number of seconds")
    headers = raw.get("headers") or {}
    allowed = raw.get("allowedEnvVars") or []
    return Handler(
        kind,
        raw[key],
        float(timeout),
        where.split(":", 1)[0],
        {str(k): str(v) for k, v in headers.items()} if isinstance(headers, dict) else {},
        tuple(str(name) for name in allowed) if isinstance(allowed, list) else (),
    )


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise HookSettingsError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise HookSettingsError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None


def read_hooks(paths: Iterable[Path], default_timeout: float) -> HookSet:
    """The hooks of these settings files, merged in order (a missing file has none)."""
    hooks = HookSet()
    for path in paths:
        data = _read(path)
        if data is not None:
            hooks = hooks.merged(parse_hooks(data, str(path), default_timeout))
    return hooks


def project_files(cwd: Path) -> list[Path]:
    return [cwd / name for name in PROJECT_FILES]


def project_digest(cwd: Path) -> str | None:
    """A digest of the project's settings files as they are now (None: it has none)."""
    digest = hashlib.sha256()
    found = False
    for path in project_files(cwd):
        try:
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
            found = True
        except OSError:
            continue
    return digest.hexdigest() if found else None


def _trusted(home: Path) -> dict[str, str]:
    try:
        data = json.loads((home / TRUST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def is_trusted(home: Path, cwd: Path) -> bool:
    digest = project_digest(cwd)
    return digest is not None and _trusted(home).get(str(cwd.resolve())) == digest


def trust(home: Path, cwd: Path, *, revoke: bool = False) -> str | None:
    """Trust (or stop trusting) the project's hooks as its files are now; the digest trusted,
    None when revoked or the project has no settings file."""
    trusted = _trusted(home)
    key = str(cwd.resolve())
    digest = None if revoke else project_digest(cwd)
    if digest is None:
        trusted.pop(key, None)
    else:
        trusted[key] = digest
    home.mkdir(parents=True, exist_ok=True)
    tmp = home / f".{TRUST_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(trusted, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, home / TRUST_FILE)
    return digest


@dataclass(frozen=True, slots=True)
class LoadedHooks:
    """The hooks that run for an agent, and the project files whose hooks do not."""

    hooks: HookSet
    untrusted: list[Path]
    """Project settings files with hooks that do not run (not trusted, or changed since)."""


def load_hooks(home: Path, cwd: Path, default_timeout: float) -> LoadedHooks:
    """The hooks that apply to an agent in `cwd`: the home's, then the trusted project's."""
    hooks = read_hooks([home / HOME_FILE], default_timeout)
    files = [path for path in project_files(cwd) if path.is_file()]
    if not files:
        return LoadedHooks(hooks, [])
    if not is_trusted(home, cwd):
        try:
            ignored = bool(read_hooks(files, default_timeout).events)
        except HookSettingsError:
            ignored = True
        return LoadedHooks(hooks, files if ignored else [])
    return LoadedHooks(hooks.merged(read_hooks(files, default_timeout)), [])
