"""Configuration: arguments > $TALARIA_HOME/config.yaml > environment > defaults.

The file is plain YAML with the dotted keys of DESIGN.md (`model.default`, `agent.max_turns`,
`compression.threshold`, ...). A broken file is a clear `ConfigError` naming the file and the
problem; it never silently falls back to defaults.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULTS: dict[str, Any] = {
    "model": {
        "default": None,
        "provider": None,
        "base_url": None,
        "api_key": None,
        "api_mode": None,
        "context_length": None,
        "max_tokens": None,
        "first_byte_timeout": 120,
        "stream_idle_timeout": 90,
        "api_key_command": None,
        "options": {},
    },
    "agent": {
        "max_turns": 90,
        "max_tool_workers": 8,
        "stream": True,
        "tool_timeout": 600,
        "max_cost_usd": None,
        "max_session_cost_usd": None,
        "max_tokens_per_turn": None,
        "max_session_tokens": None,
    },
    "compression": {"enabled": True, "threshold": 0.5, "protect_last_n": 20},
    "context": {"engine": "default"},
    "prompt": {"profile": "auto", "lean_below": 16384},
    "tools": {"text_calls": True},
    "providers": {},
    "profiles": {},
    "prompt_caching": {"enabled": True, "ttl": "5m"},
    "fallback_providers": [],
    "auxiliary": {},
    "delegation": {"max_iterations": 50, "max_concurrent_children": 3, "timeout": 600},
    "memory": {"enabled": True, "memory_char_limit": 2200, "user_char_limit": 1375},
    "approvals": {"mode": "manual", "timeout": 300},
    "sandbox": {
        "mode": "workspace-write",
        "network": False,
        "writable_roots": [],
        "required": False,
    },
    "command_allowlist": [],
    "retry": {"max_attempts": 3, "base_delay": 1.0, "max_delay": 30.0},
    "telemetry": {"enabled": False, "capture_content": False, "agent_name": "talaria"},
    "store": {"url": None, "pool_size": 10},
    "durable": {"heartbeat_timeout": 30, "model_call_timeout": 900, "lease_ttl": 900},
}

BUDGET_KEYS = (
    "agent.max_cost_usd",
    "agent.max_session_cost_usd",
    "agent.max_tokens_per_turn",
    "agent.max_session_tokens",
)
"""Spending limits: unset (None) means no limit."""


class ConfigError(ValueError):
    """The configuration cannot be used as written."""


def default_home() -> Path:
    return Path(os.environ.get("TALARIA_HOME") or Path.home() / ".talaria").expanduser()


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_config_file(path: Path) -> dict[str, Any]:
    """The YAML mapping in `path` ({} when the file does not exist)."""
    if not path.exists():
        return {}
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    return data


def _environment_layer(env: Mapping[str, str]) -> dict[str, Any]:
    layer: dict[str, Any] = {}
    model: dict[str, Any] = {}
    if env.get("TALARIA_MODEL"):
        model["default"] = env["TALARIA_MODEL"]
    if env.get("TALARIA_PROVIDER"):
        model["provider"] = env["TALARIA_PROVIDER"]
    if env.get("TALARIA_BASE_URL"):
        model["base_url"] = env["TALARIA_BASE_URL"]
    if model:
        layer["model"] = model
    otel = env.get("TALARIA_OTEL", "").strip().lower()
    if otel:
        layer["telemetry"] = {"enabled": otel in ("1", "true", "yes", "on")}
    return layer


@dataclass
class Config:
    """Merged settings with dotted access (`config.get("compression.threshold")`)."""

    data: dict[str, Any] = field(default_factory=lambda: copy.deepcopy(DEFAULTS))
    home: Path = field(default_factory=default_home)
    path: Path | None = None

    @classmethod
    def load(
        cls,
        home: Path | str | None = None,
        overrides: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Config:
        home_path = Path(home).expanduser() if home else default_home()
        path = home_path / "config.yaml"
        data = _deep_merge(copy.deepcopy(DEFAULTS), _environment_layer(env or os.environ))
        data = _deep_merge(data, read_config_file(path))
        if overrides:
            data = _deep_merge(data, _expand_dotted(overrides))
        config = cls(data=data, home=home_path, path=path)
        config.validate()
        return config

    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return default if node is None else node

    def validate(self) -> None:
        checks: dict[str, type | tuple[type, ...]] = {
            "agent.max_turns": int,
            "compression.threshold": (int, float),
            "compression.protect_last_n": int,
            "delegation.max_iterations": int,
            "delegation.max_concurrent_children": int,
            "memory.memory_char_limit": int,
            "memory.user_char_limit": int,
        }
        for key, expected in checks.items():
            value = self.get(key)
            if isinstance(value, bool) or not isinstance(value, expected):
                raise ConfigError(f"{self.path or 'config'}: {key} must be a number, got {value!r}")
        threshold = float(self.get("compression.threshold"))
        if not 0.05 <= threshold <= 1.0:
            raise ConfigError(f"{self.path or 'config'}: compression.threshold must be in (0, 1]")
        if self.get("approvals.mode") not in ("manual", "off"):
            raise ConfigError(f"{self.path or 'config'}: approvals.mode must be 'manual' or 'off'")
        for key in BUDGET_KEYS:
            limit = self.get(key)
            if limit is not None and (
                isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0
            ):
                raise ConfigError(
                    f"{self.path or 'config'}: {key} must be a positive number, got {limit!r}"
                )
        self._validate_sandbox()
        if self.get("prompt.profile") not in ("auto", "full", "lean"):
            raise ConfigError(
                f"{self.path or 'config'}: prompt.profile must be 'auto', 'full' or 'lean'"
            )
        if not isinstance(self.get("fallback_providers", []), list):
            raise ConfigError(f"{self.path or 'config'}: fallback_providers must be a list")
        self._validate_profiles()

    def _validate_profiles(self) -> None:
        """The ``profiles:`` section (model-family overrides); imported only when there is one."""
        profiles = self.get("profiles", {})
        if profiles == {}:
            return
        from talaria.providers.profiles.profile import profiles_problem

        problem = profiles_problem(profiles)
        if problem:
            raise ConfigError(f"{self.path or 'config'}: {problem}")

    def _validate_sandbox(self) -> None:
        where = self.path or "config"
        modes = ("read-only", "workspace-write", "full-access")
        if self.get("sandbox.mode") not in modes:
            raise ConfigError(f"{where}: sandbox.mode must be one of {', '.join(modes)}")
        roots = self.get("sandbox.writable_roots", [])
        if not isinstance(roots, list) or not all(isinstance(r, str) for r in roots):
            raise ConfigError(f"{where}: sandbox.writable_roots must be a list of paths")
        for key in ("sandbox.network", "sandbox.required"):
            if not isinstance(self.get(key, False), bool):
                raise ConfigError(f"{where}: {key} must be true or false")


def _expand_dotted(overrides: Mapping[str, Any]) -> dict[str, Any]:
    expanded: dict[str, Any] = {}
    for key, value in overrides.items():
        if value is None:
            continue
        node = expanded
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return expanded


def set_config_value(path: Path, dotted: str, value: Any) -> None:
    """Write one dotted key into the YAML file, keeping the rest of it."""
    import yaml

    data = read_config_file(path)
    node = data
    *parents, leaf = dotted.split(".")
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[leaf] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".yaml.{os.getpid()}.tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    os.replace(tmp, path)


def add_to_config_list(path: Path, dotted: str, item: Any) -> None:
    """Append `item` to a list key unless it is there, re-reading the file under an exclusive
    lock so that concurrent writers (two agents granting "always") never drop each other's."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".yaml.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        node: Any = read_config_file(path)
        for part in dotted.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        current = list(node) if isinstance(node, list) else []
        if item not in current:
            set_config_value(path, dotted, [*current, item])
