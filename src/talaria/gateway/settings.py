"""`gateway.platforms.<name>` as the gateway uses it: checked once at start, secrets filled in.

A secret is written as `${VAR}` (from the environment) or as `{command: "..."}` (the command's
output, e.g. a password manager); neither is ever logged. Everything an adapter needs besides
the keys below is passed to it as it is (`PlatformSettings.options`).
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from talaria.config_schema import ConfigError
from talaria.gateway.platform import ADAPTERS
from talaria.mcp.config import expand

BUSY_MODES = ("queue", "interrupt", "steer")
SECRET_COMMAND_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class RoomSettings:
    """What one room changes of its platform's defaults (`rooms.<chat id>`, or `/model`)."""

    model: str | None = None
    prompt: str | None = None
    busy: str | None = None


@dataclass(frozen=True, slots=True)
class PlatformSettings:
    name: str
    type: str
    allow_users: frozenset[str] = frozenset()
    """User ids that may talk to the agent anywhere on this platform (and answer approvals)."""
    allow_rooms: frozenset[str] = frozenset()
    """Group rooms where anyone present may talk to it (when addressed)."""
    pairing: bool = True
    """A stranger in a direct message gets a code the owner can approve."""
    prefix: str | None = None
    """In group rooms, a message starting with this also addresses the agent."""
    busy: str = "queue"
    model: str | None = None
    prompt: str | None = None
    """The system prompt of these conversations, instead of talaria's own (None: talaria's)."""
    stream: bool = True
    rooms: Mapping[str, RoomSettings] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    """The adapter's own settings (token, server, ...), secrets resolved."""


_OWN_KEYS = frozenset(
    {"type", "allow_users", "allow_rooms", "pairing", "prefix", "busy", "model", "prompt",
     "stream", "rooms"}
)  # fmt: skip


def platform_settings(name: str, raw: Mapping[str, Any]) -> PlatformSettings:
    where = f"gateway.platforms.{name}"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping of settings")
    kind = str(raw.get("type") or name)
    if kind not in ADAPTERS:
        raise ConfigError(f"{where}.type: {kind!r} is not one of {', '.join(sorted(ADAPTERS))}")
    busy = str(raw.get("busy") or "queue")
    _check_busy(busy, f"{where}.busy")
    rooms = {str(k): _room(v, f"{where}.rooms.{k}") for k, v in (raw.get("rooms") or {}).items()}
    return PlatformSettings(
        name=name,
        type=kind,
        allow_users=_ids(raw.get("allow_users"), f"{where}.allow_users"),
        allow_rooms=_ids(raw.get("allow_rooms"), f"{where}.allow_rooms"),
        pairing=bool(raw.get("pairing", True)),
        prefix=raw.get("prefix") or None,
        busy=busy,
        model=raw.get("model") or None,
        prompt=raw.get("prompt") or None,
        stream=bool(raw.get("stream", True)),
        rooms=rooms,
        options={
            k: resolve_secrets(v, f"{where}.{k}") for k, v in raw.items() if k not in _OWN_KEYS
        },
    )


def _check_busy(busy: str, where: str) -> None:
    if busy not in BUSY_MODES:
        raise ConfigError(f"{where}: found {busy!r}, expected one of {', '.join(BUSY_MODES)}")


def _room(raw: Any, where: str) -> RoomSettings:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping (model, prompt, busy)")
    busy = raw.get("busy")
    if busy is not None:
        _check_busy(str(busy), f"{where}.busy")
    return RoomSettings(raw.get("model"), raw.get("prompt"), busy)


def _ids(raw: Any, where: str) -> frozenset[str]:
    if raw is None:
        return frozenset()
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: expected a list of ids")
    return frozenset(str(item) for item in raw)


def resolve_secrets(value: Any, where: str) -> Any:
    """`value` with `${VAR}` expanded in every string and `{command: ...}` replaced by the
    command's output."""
    if isinstance(value, str):
        return expand(value)
    if isinstance(value, list):
        return [resolve_secrets(item, where) for item in value]
    if isinstance(value, Mapping):
        if set(value) == {"command"}:
            return _command_output(str(value["command"]), where)
        return {k: resolve_secrets(v, f"{where}.{k}") for k, v in value.items()}
    return value


def _command_output(command: str, where: str) -> str:
    try:
        done = subprocess.run(
            shlex.split(command),
            capture_output=True,
            text=True,
            timeout=SECRET_COMMAND_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"{where}: the secret command failed ({type(exc).__name__})") from None
    if done.returncode != 0:
        raise ConfigError(f"{where}: the secret command exited with {done.returncode}")
    return done.stdout.strip()


def all_platforms(raw: Any) -> list[PlatformSettings]:
    if not raw:
        raise ConfigError("gateway.platforms: no platform configured (see docs/gateway.md)")
    if not isinstance(raw, Mapping):
        raise ConfigError("gateway.platforms: expected a mapping of platform name -> settings")
    return [platform_settings(str(name), settings) for name, settings in raw.items()]
