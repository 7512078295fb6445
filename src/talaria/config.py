"""Configuration: arguments > $TALARIA_HOME/config.yaml > environment > defaults.

The file is plain YAML with dotted keys (`model.default`, `agent.max_iterations`,
`compression.threshold`, ...). Each layer is checked against `config_schema.SCHEMA` when it is
loaded: a wrong value is one `ConfigError` line naming the file, the key, what was found and
what is expected; it never silently falls back to defaults. Code reads settings as attributes
of frozen sections (`config.agent.max_iterations`), whose defaults are the schema's; an old
name (`agent.max_turns`) keeps working with one deprecation notice.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from talaria.config_schema import (
    ALIASES,
    SCHEMA,
    SECTIONS,
    ConfigError,
    as_meant,
    default_for,
    defaults,
    problems,
    suggestion,
)
from talaria.config_schema import unknown_keys as schema_unknown_keys

if TYPE_CHECKING:
    from talaria.config_types import (
        AgentSection,
        ApprovalsSection,
        BrowserSection,
        CheckpointsSection,
        CompressionSection,
        ContextSection,
        DelegationSection,
        DurableSection,
        GatewaySection,
        HooksSection,
        MemorySection,
        ModelSection,
        PluginsSection,
        PromptCachingSection,
        PromptSection,
        RetrySection,
        SandboxSection,
        ServerSection,
        SkillsSection,
        StoreSection,
        TelemetrySection,
        ToolsSection,
        WebSection,
    )

__all__ = ["DEFAULTS", "Config", "ConfigError", "default_home"]

log = logging.getLogger("talaria.config")

DEFAULTS: dict[str, Any] = defaults()
"""Every setting's default (built from `config_schema.SCHEMA`)."""


def default_home() -> Path:
    return Path(os.environ.get("TALARIA_HOME") or Path.home() / ".talaria").expanduser()


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if value is None and isinstance(merged.get(key), dict):
            continue  # an empty section (`model:` with nothing under it) keeps the defaults
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


MAX_CONFIG_BYTES = 1024 * 1024
"""Largest config file read (a real one is a few kilobytes)."""
MAX_CONFIG_NODES = 100_000
"""Most values a config may hold once its YAML aliases are expanded: a few nested aliases
("billion laughs") stand for billions of values, which every later walk would visit."""
MAX_CONFIG_DEPTH = 64
"""Deepest nesting of mappings and lists in a config (talaria's own go four deep)."""


def read_config_file(path: Path) -> dict[str, Any]:
    """The YAML mapping in `path` ({} when the file does not exist)."""
    if not path.exists():
        return {}
    import yaml

    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{path}: larger than {MAX_CONFIG_BYTES // 1024} KB, so not a talaria config; "
                f"{REPAIR_HINT}"
            )
        data = _safe_load(yaml, path.read_text(encoding="utf-8"))
    except RecursionError:
        _refuse_shape(path)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML{_where(exc)}; {REPAIR_HINT}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: found {type(data).__name__}, expected a mapping of settings; {REPAIR_HINT}"
        )
    if expanded_size(data, MAX_CONFIG_NODES, MAX_CONFIG_DEPTH) > MAX_CONFIG_NODES:
        _refuse_shape(path)
    return as_meant(data)


def _safe_load(yaml: Any, text: str) -> Any:
    """`yaml.safe_load` through libyaml where PyYAML was built with it: the same constructor
    makes the same values from a document, several times faster. A document libyaml refuses
    is read again by the pure-Python loader, whose errors say where the problem is and which
    the refusals above expect. Writes keep their round trip (`talaria.config_write`)."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is not None:
        try:
            return yaml.load(text, Loader=loader)
        except yaml.YAMLError:
            pass
    return yaml.safe_load(text)


def _refuse_shape(path: Path) -> NoReturn:
    raise ConfigError(
        f"{path}: nested deeper than {MAX_CONFIG_DEPTH} levels, or its aliases (*name) expand "
        f"to more than {MAX_CONFIG_NODES:,} values or refer to themselves; write the values "
        f"out instead; {REPAIR_HINT}"
    )


def expanded_size(data: Any, limit: int, depth: int) -> int:
    """How many values `data` holds with every shared (aliased) part counted each time it is
    used; past `limit`, or `depth` levels of nesting, or a part that contains itself, the
    answer is `limit + 1`. Each distinct container is measured once: the cost is the
    document's size, not the expansion's."""
    sizes: dict[int, int] = {}
    over = limit + 1

    def size(node: Any, level: int) -> int:
        if not isinstance(node, dict | list):
            return 1
        if level > depth:
            return over
        known = sizes.get(id(node))
        if known is not None:
            return known
        sizes[id(node)] = over  # met again while measured: it contains itself
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        total = 1
        for child in children:
            total += size(child, level + 1)
            if total > limit:
                break
        sizes[id(node)] = total = min(total, over)
        return total

    return size(data, 1)


REPAIR_HINT = "fix it in an editor, or move it aside (mv config.yaml config.yaml.bak) and retry"


def _where(exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or ""
    if mark is None:
        return ""
    return f" at line {mark.line + 1}, column {mark.column + 1}" + (
        f" ({problem})" if problem else ""
    )


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
    if env.get("TALARIA_STORE_URL"):
        layer["store"] = {"url": env["TALARIA_STORE_URL"]}
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

    if TYPE_CHECKING:
        # The schema's sections and top-level settings, as `__getattr__` answers them, with
        # the types scripts/config_types.py writes (tests/config/test_config_types.py keeps
        # the two in step). Class variables, so the dataclass does not take them as fields.
        model: ClassVar[ModelSection]
        agent: ClassVar[AgentSection]
        compression: ClassVar[CompressionSection]
        context: ClassVar[ContextSection]
        prompt: ClassVar[PromptSection]
        tools: ClassVar[ToolsSection]
        providers: ClassVar[Mapping[str, Any]]
        profiles: ClassVar[Mapping[str, Any]]
        prompt_caching: ClassVar[PromptCachingSection]
        fallback_providers: ClassVar[list[Mapping[str, Any]]]
        auxiliary: ClassVar[Mapping[str, Any]]
        delegation: ClassVar[DelegationSection]
        skills: ClassVar[SkillsSection]
        hooks: ClassVar[HooksSection]
        memory: ClassVar[MemorySection]
        approvals: ClassVar[ApprovalsSection]
        command_allowlist: ClassVar[list[str]]
        plugins: ClassVar[PluginsSection]
        retry: ClassVar[RetrySection]
        store: ClassVar[StoreSection]
        durable: ClassVar[DurableSection]
        mcp_servers: ClassVar[Mapping[str, Any]]
        sandbox: ClassVar[SandboxSection]
        checkpoints: ClassVar[CheckpointsSection]
        web: ClassVar[WebSection]
        browser: ClassVar[BrowserSection]
        telemetry: ClassVar[TelemetrySection]
        server: ClassVar[ServerSection]
        gateway: ClassVar[GatewaySection]

    @classmethod
    def load(
        cls,
        home: Path | str | None = None,
        overrides: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Config:
        home_path = Path(home).expanduser() if home else default_home()
        path = home_path / "config.yaml"
        environment = _environment_layer(env or os.environ)
        _check_layer(environment, "the environment (TALARIA_*)")
        from_file = read_config_file(path)
        _check_layer(from_file, str(path))
        _warn_unknown(from_file, path)
        _rename_old_keys(from_file, str(path))
        data = _deep_merge(copy.deepcopy(DEFAULTS), environment)
        data = _deep_merge(data, from_file)
        if overrides:
            expanded = _expand_dotted(overrides)
            _check_layer(expanded, "config argument")
            _rename_old_keys(expanded, "config argument")
            data = _deep_merge(data, expanded)
        return cls(data=data, home=home_path, path=path)

    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.data
        for part in ALIASES.get(dotted, dotted).split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return default if node is None else node

    def __getattr__(self, name: str) -> Any:
        """A section (`config.agent`) or a top-level setting (`config.command_allowlist`)."""
        if name.startswith("_"):
            raise AttributeError(name)
        return _read(self.data, name, name)

    def validate(self) -> None:
        """Check the merged settings against the schema (raises the first problem)."""
        _check_layer(self.data, str(self.path or "config"))


class Section:
    """One group of settings, read as attributes (`config.agent.max_iterations`); its keys
    and their defaults are the schema's, and it cannot be changed."""

    __slots__ = ("_key", "_values")

    def __init__(self, key: str, values: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return _read(self._values, f"{self._key}.{name}", name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"settings are read-only ({self._key}.{name}); pass config=")

    def __repr__(self) -> str:
        return f"Section({self._key!r}, {dict(self._values)!r})"


def _read(values: Mapping[str, Any], key: str, name: str) -> Any:
    """The setting `key` (`name` within `values`): its value, else the schema's default."""
    if key in ALIASES:
        key = ALIASES[key]
        name = key.rpartition(".")[2]
    if key in SCHEMA:
        value = values.get(name)
        if value is not None:
            return value
        return default_for(key)
    if key in SECTIONS:
        section = values.get(name)
        return Section(key, section if isinstance(section, Mapping) else {})
    raise AttributeError(f"{key} is not a setting{suggestion(key)}")


def _check_layer(layer: dict[str, Any], origin: str) -> None:
    found = problems(layer)
    if found:
        raise ConfigError(found[0].line(origin))


_warned: set[tuple[str, str]] = set()


def _warn_unknown(layer: dict[str, Any], path: Path) -> None:
    """A key talaria does not know is a warning, once per file and key (newer configs load)."""
    for key in schema_unknown_keys(layer):
        if (str(path), key) not in _warned:
            _warned.add((str(path), key))
            log.warning("%s: unknown setting %s%s; ignored", path, key, suggestion(key))


def _rename_old_keys(layer: dict[str, Any], origin: str) -> None:
    """Move values set under an old name (`ALIASES`) to the new key of the same layer, unless
    the layer sets that too; one deprecation notice per origin and key."""
    for old, new in ALIASES.items():
        *old_parents, old_leaf = old.split(".")
        parent = _node(layer, old_parents)
        if parent is None or old_leaf not in parent:
            continue
        value = parent.pop(old_leaf)
        *new_parents, new_leaf = new.split(".")
        target = _node(layer, new_parents, create=True)
        if target is not None:
            target.setdefault(new_leaf, value)
        if (origin, old) not in _warned:
            _warned.add((origin, old))
            log.warning("%s: %s is deprecated; it is now called %s", origin, old, new)


def _node(layer: dict[str, Any], path: list[str], create: bool = False) -> dict[str, Any] | None:
    node = layer
    for part in path:
        child = node.get(part)
        if not isinstance(child, dict):
            if not create:
                return None
            child = node[part] = {}
        node = child
    return node


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
