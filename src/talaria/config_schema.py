"""Every configuration key talaria reads, with its type, range and default, in one table.

`SCHEMA` is the single source: `config.DEFAULTS` is built from it, `Config.load` checks every
layer against it, `talaria config set` refuses values it rejects. Adding a key is one line.
A wrong value is a `ConfigError` whose message is one line:
``<file>: <key>: found <value>, expected <what>``. A key the table does not know is a warning
(naming the closest known key), not an error, so a newer config still loads.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

API_MODES = ("chat_completions", "codex_responses", "anthropic_messages")


class ConfigError(ValueError):
    """The configuration cannot be used as written (one line: where, which key, what is wrong)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """What one key accepts: `check` returns None when the value is fine, else what it
    expected (`None` is accepted only where the default is None: "not set")."""

    default: Any
    expected: str
    check: Callable[[Any], bool]
    explain: Callable[[Any], str | None] | None = None
    """A more precise `expected` for the value at hand (e.g. which part of a URL is wrong)."""
    verbatim: bool = False
    """`explain` says the whole problem in its own words, naming the dotted key itself (which
    entry, which fact), not only what was expected."""
    secret: tuple[str, ...] = ()
    """Where the value holds secrets, as dotted paths inside it (`""`: the value itself; `*`:
    any key or list item), e.g. `("*.env.*",)`: `config show` masks them and errors do not
    print them."""
    from_yaml: Callable[[Any], Any] | None = None
    """What the user meant by a value YAML read as something else (`off` is read as false)."""
    value_type: str = "Any"
    """The type code reads, as an annotation (`| None` is added where the default is None):
    scripts/config_types.py writes `talaria.config_types` from it, for mypy only."""

    def problem(self, value: Any) -> str | None:
        if value is None and self.default is None:
            return None
        if self.check(value):
            return None
        return (self.explain(value) if self.explain else None) or self.expected


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def integer(default: int | None, minimum: int = 0, maximum: int | None = None) -> Rule:
    span = f"from {minimum} to {maximum}" if maximum is not None else f"of at least {minimum}"
    return Rule(
        default,
        f"a whole number {span}",
        lambda v: _is_int(v) and v >= minimum and (maximum is None or v <= maximum),
        value_type="int",
    )


def number(
    default: float | None, minimum: float = 0.0, maximum: float | None = None, unit: str = ""
) -> Rule:
    span = f"from {minimum:g} to {maximum:g}" if maximum is not None else f"of at least {minimum:g}"
    return Rule(
        default,
        f"a number {span}{unit}",
        lambda v: _is_number(v) and v >= minimum and (maximum is None or v <= maximum),
        value_type="float",
    )


def seconds(default: float | None, *, zero_means_off: bool = False) -> Rule:
    if zero_means_off:
        return Rule(default, "a number of seconds (0: no limit)", _is_number, value_type="float")
    return Rule(
        default,
        "a positive number of seconds",
        lambda v: _is_number(v) and v > 0,
        value_type="float",
    )


def positive(default: float | None) -> Rule:
    """A limit: unset (None) means none."""
    return Rule(default, "a positive number", lambda v: _is_number(v) and v > 0, value_type="float")


def boolean(default: bool | None) -> Rule:
    return Rule(default, "true or false", lambda v: isinstance(v, bool), value_type="bool")


def string(default: str | None = None, *, secret: bool = False) -> Rule:
    return Rule(
        default,
        "a string",
        lambda v: isinstance(v, str),
        secret=("",) if secret else (),
        value_type="str",
    )


def choice(default: str | None, *options: str) -> Rule:
    words = {word: word for word in options}
    switch = {flag: words[name] for flag, name in ((True, "on"), (False, "off")) if name in words}
    return Rule(
        default,
        " | ".join(options),
        lambda v: v in options,
        from_yaml=(lambda v: switch.get(v, v) if isinstance(v, bool) else v) if switch else None,
        value_type=f"Literal[{', '.join(json.dumps(option) for option in options)}]",
    )


def strings(default: tuple[str, ...] = ()) -> Rule:
    return Rule(
        list(default),
        "a list of strings",
        lambda v: isinstance(v, list) and all(isinstance(item, str) for item in v),
        value_type="list[str]",
    )


def mapping(what: str = "a mapping", *, secret: tuple[str, ...] = ()) -> Rule:
    return Rule(
        {}, what, lambda v: isinstance(v, dict), secret=secret, value_type="Mapping[str, Any]"
    )


_ENGINE = re.compile(r"default|none|[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*", re.ASCII)


def engine() -> Rule:
    """`context.engine`: a built-in name or where a `ContextEngine` subclass is (the import
    itself is tried when an agent is assembled, before its first request)."""
    return Rule(
        "default",
        "'default', 'none' or 'package.module:ClassName'",
        lambda v: isinstance(v, str) and _ENGINE.fullmatch(v) is not None,
        value_type="str",
    )


def url_problem(value: Any) -> str | None:
    """Why `value` is not a usable endpoint URL (None when it is)."""
    if not isinstance(value, str):
        return "an http(s) URL"
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port outside 0-65535
    except ValueError:
        return "an http(s) URL with a port from 1 to 65535"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "an http(s) URL such as http://127.0.0.1:8080/v1"
    return None


def url(default: str | None = None) -> Rule:
    return Rule(
        default,
        "an http(s) URL",
        lambda v: url_problem(v) is None,
        url_problem,
        value_type="str",
    )


def _profiles_problem(value: Any) -> str | None:
    from talaria.providers.profiles.profile import profiles_problem

    return profiles_problem(value)


def profiles() -> Rule:
    """`profiles:` (model pattern -> profile facts), checked by the profile table's own rules."""
    return Rule(
        {},
        "a mapping of model patterns to profile facts",
        lambda v: _profiles_problem(v) is None,
        _profiles_problem,
        verbatim=True,
        value_type="Mapping[str, Any]",
    )


def any_value(default: Any = None, *, secret: bool = False) -> Rule:
    return Rule(default, "anything", lambda v: True, secret=("",) if secret else ())


CLIENT_OPTION_SECRETS = ("default_headers.*", "headers.*", "api_key")
"""Inside a model's client `options`: the headers it sends (an Authorization among them)."""

ENTRY_RULES: dict[str, Rule] = {
    "provider": string(),
    "model": string(),
    "base_url": url(),
    "api_key": string(secret=True),
    "api_key_command": string(secret=True),
    "api_key_refresh": any_value(secret=True),
    "api_mode": choice(None, *API_MODES),
    "options": mapping(secret=CLIENT_OPTION_SECRETS),
    "fallback": Rule([], "a list of model entries", lambda v: isinstance(v, list)),
}
"""The keys of one model entry (a `fallback_providers` item, an `auxiliary.<task>`)."""


def _entry_secrets() -> tuple[str, ...]:
    """The secrets of a model entry, under any name or index, and of its own fallbacks."""
    inside = [
        f"{name}.{path}".rstrip(".") for name, rule in ENTRY_RULES.items() for path in rule.secret
    ]
    return tuple(f"*.{path}" for path in inside) + tuple(f"*.fallback.*.{p}" for p in inside)


ENTRY_SECRETS = _entry_secrets()

SCHEMA: dict[str, Rule] = {
    "model.default": string(),
    "model.provider": string(),
    "model.base_url": url(),
    "model.api_key": string(secret=True),
    "model.api_mode": choice(None, *API_MODES),
    "model.context_length": integer(None, minimum=1),
    "model.max_tokens": integer(None, minimum=1),
    "model.first_byte_timeout": seconds(120, zero_means_off=True),
    "model.stream_idle_timeout": seconds(90, zero_means_off=True),
    "model.total_timeout": seconds(600),
    "model.api_key_command": string(secret=True),
    "model.api_key_refresh": any_value(secret=True),
    "model.options": mapping(
        "a mapping of client options (timeout, default_headers, ...)", secret=CLIENT_OPTION_SECRETS
    ),
    "model.vision": boolean(None),
    "agent.max_iterations": integer(90, minimum=1),
    "agent.max_tool_workers": integer(8, minimum=1, maximum=256),
    "agent.stream": boolean(True),
    "agent.tool_timeout": seconds(600),
    "agent.max_cost_usd": positive(None),
    "agent.max_session_cost_usd": positive(None),
    "agent.max_tokens_per_turn": integer(None, minimum=1),
    "agent.max_session_tokens": integer(None, minimum=1),
    "compression.enabled": boolean(True),
    "compression.threshold": number(0.5, minimum=0.05, maximum=1.0),
    "compression.protect_last_n": integer(20),
    "context.engine": engine(),
    "prompt.profile": choice("auto", "auto", "full", "lean"),
    "prompt.lean_below": integer(16384),
    "tools.text_calls": boolean(True),
    "providers": mapping("a mapping of name -> model entry", secret=ENTRY_SECRETS),
    "profiles": profiles(),
    "prompt_caching.enabled": boolean(True),
    "prompt_caching.ttl": choice("5m", "5m", "1h"),
    "fallback_providers": Rule(
        [],
        "a list of provider entries",
        lambda v: isinstance(v, list),
        secret=ENTRY_SECRETS,
        value_type="list[Mapping[str, Any]]",
    ),
    "auxiliary": mapping("a mapping of task -> model entry", secret=ENTRY_SECRETS),
    "delegation.max_iterations": integer(50, minimum=1),
    "delegation.max_concurrent_children": integer(3, minimum=1),
    "delegation.timeout": seconds(600),
    "delegation.approvals": choice("manual", "manual", "off"),
    "skills.index_chars": integer(8000, minimum=0),
    "hooks.timeout": seconds(60),
    "memory.enabled": boolean(True),
    "memory.memory_char_limit": integer(2200, minimum=1),
    "memory.user_char_limit": integer(1375, minimum=1),
    "approvals.mode": choice("manual", "manual", "off"),
    "approvals.timeout": seconds(300),
    "command_allowlist": strings(),
    "plugins.required": strings(),
    "retry.max_attempts": integer(3, minimum=1),
    "retry.base_delay": number(1.0),
    "retry.max_delay": number(30.0),
    "store.url": string(),
    "store.pool_size": integer(10, minimum=1),
    "store.lock_timeout": seconds(10),
    "durable.heartbeat_timeout": seconds(30),
    "durable.model_call_timeout": seconds(900),
    "durable.lease_ttl": seconds(900),
    "mcp_servers": mapping(
        "a mapping of server name -> {command, args, env} or {url}",
        secret=("*.env.*", "*.headers.*"),
    ),
    "sandbox.mode": choice("workspace-write", "read-only", "workspace-write", "full-access"),
    "sandbox.network": boolean(False),
    "sandbox.writable_roots": strings(),
    "sandbox.required": boolean(False),
    "sandbox.bwrap_path": string(),
    "sandbox.hidden_paths": strings(),
    "checkpoints.enabled": boolean(True),
    "checkpoints.max_file_bytes": integer(10 * 1024 * 1024),
    "checkpoints.max_age_days": number(30.0),
    "checkpoints.max_total_mb": number(2048.0),
    "web.enabled": boolean(False),
    "web.allow_private": Rule(
        False,
        "true, false or a list of host names",
        lambda v: (
            isinstance(v, bool)
            or (isinstance(v, list) and all(isinstance(item, str) for item in v))
        ),
        value_type="bool | list[str]",
    ),
    "web.allow": strings(),
    "web.deny": strings(),
    "web.ask_unknown": boolean(False),
    "web.timeout": seconds(30),
    "web.max_bytes": integer(10 * 1024 * 1024, minimum=1024),
    "web.search.searxng_url": url(),
    "browser.enabled": boolean(False),
    "browser.executable": string(),
    "browser.headless": boolean(True),
    "browser.timeout": seconds(30),
    "telemetry.enabled": boolean(False),
    "telemetry.capture_content": boolean(False),
    "telemetry.agent_name": string("talaria"),
    "server.host": string("127.0.0.1"),
    "server.port": integer(8642, minimum=0, maximum=65535),
    "server.api_key": string(secret=True),
    "server.allowed_hosts": strings(),
    "server.allowed_origins": strings(),
    "server.cors_origins": strings(),
    "server.max_body_bytes": integer(4 * 1024 * 1024, minimum=1024),
    "server.header_timeout": seconds(10),
    "server.keep_alive_timeout": integer(5, minimum=1),
    "server.max_connections": integer(1000, minimum=1),
    "server.approvals": choice("deny", "deny", "off"),
    "server.max_live_sessions": integer(256, minimum=1),
    "server.run_retention": seconds(900),
    "gateway.platforms": mapping(
        "a mapping of platform name -> {type, token, allow_users, allow_rooms, ...}",
        secret=("*.token", "*.bot_token", "*.app_token", "*.password", "*.signing_secret"),
    ),
    "gateway.edit_interval": seconds(1.0),
    "gateway.compress_at": number(0.85, minimum=0.1, maximum=1.0),
    "gateway.pairing_code_ttl": seconds(3600),
}


ALIASES: dict[str, str] = {
    "agent.max_turns": "agent.max_iterations",
}
"""Old names that keep working: a layer that sets one sets the new key (with one deprecation
notice per file). `agent.max_turns` counted model calls per turn, while a talaria "turn" is one
user exchange."""


def defaults() -> dict[str, Any]:
    """The nested default settings (a fresh copy each call)."""
    tree: dict[str, Any] = {}
    for key, rule in SCHEMA.items():
        *parents, leaf = key.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = json.loads(json.dumps(rule.default))
    return tree


def default_for(key: str) -> Any:
    """The schema's default for the setting `key` (a fresh copy of a list or mapping): what a
    class built from the settings takes as its keyword defaults instead of restating them."""
    default = SCHEMA[key].default
    return copy.deepcopy(default) if isinstance(default, list | dict) else default


def _sections() -> frozenset[str]:
    return frozenset(
        ".".join(key.split(".")[:depth]) for key in SCHEMA for depth in range(1, key.count(".") + 1)
    )


SECTIONS = _sections()
"""Dotted prefixes that group keys (`model`, `agent`, ...): their values must be mappings."""


def shown(value: Any) -> str:
    """A value as the user wrote it, short."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True, slots=True)
class Problem:
    """One setting that cannot be used, said as one line."""

    key: str
    found: Any
    expected: str
    verbatim: bool = False

    def line(self, origin: str) -> str:
        if self.verbatim:
            return f"{origin}: {self.expected}"
        return f"{origin}: {self.key}: found {shown(self.found)}, expected {self.expected}"


def problems(data: Mapping[str, Any]) -> list[Problem]:
    """Every value of a (nested) settings layer that its rule rejects, in file order."""
    return [problem for kind, problem in _walk(data, "") if kind == "bad"]


def unknown_keys(data: Mapping[str, Any]) -> list[str]:
    """Keys in a settings layer that no rule and no section covers."""
    return [problem.key for kind, problem in _walk(data, "") if kind == "unknown"]


def _walk(data: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, Problem]]:
    for name, value in data.items():
        key = f"{prefix}{name}"
        rule = SCHEMA.get(ALIASES.get(key, key))
        if rule is not None:
            expected = rule.problem(value)
            if expected is not None:
                yield "bad", Problem(key, _hidden(rule, value), expected, rule.verbatim)
            else:
                yield from _entries(key, value)
        elif key in SECTIONS:
            if value is None:
                continue
            if isinstance(value, dict):
                yield from _walk(value, key + ".")
            else:
                yield "bad", Problem(key, value, f"a mapping of {key}.* settings")
        else:
            yield "unknown", Problem(key, value, "")


HIDDEN = "(hidden)"


def _hidden(rule: Rule, value: Any) -> Any:
    """What an error may print of a value: nothing when the value is a secret."""
    return HIDDEN if "" in rule.secret else value


def _entries(key: str, value: Any) -> Iterator[tuple[str, Problem]]:
    """Model entries inside `fallback_providers`, `auxiliary` and `providers` get the entry
    rules."""
    if key == "fallback_providers":
        items = [(f"{key}[{index}]", entry) for index, entry in enumerate(value)]
    elif key in ("auxiliary", "providers"):
        items = [(f"{key}.{task}", entry) for task, entry in value.items()]
    else:
        return
    for label, entry in items:
        if not isinstance(entry, dict):
            yield "bad", Problem(label, entry, "a mapping (model, provider, base_url, ...)")
            continue
        for name, item in entry.items():
            rule = ENTRY_RULES.get(name)
            expected = rule.problem(item) if rule is not None else None
            if rule is not None and expected is not None:
                yield "bad", Problem(f"{label}.{name}", _hidden(rule, item), expected)


def suggestion(key: str) -> str:
    """' (did you mean <key>?)' for the closest known key, or ''."""
    import difflib  # only a config with an unknown key needs it

    close = difflib.get_close_matches(key, [*SCHEMA, *ALIASES], n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def as_meant(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`data` (a settings layer read from YAML) with each value the user wrote as a word YAML
    1.1 turns into a boolean given back as that word (`approvals.mode: off`); changed in place."""
    for name, value in data.items():
        key = f"{prefix}{name}"
        rule = SCHEMA.get(ALIASES.get(key, key))
        if rule is not None and rule.from_yaml is not None:
            data[name] = rule.from_yaml(value)
        elif rule is None and key in SECTIONS and isinstance(value, dict):
            as_meant(value, key + ".")
    return data


def check_value(key: str, value: Any, origin: str) -> None:
    """Raise the one-line `ConfigError` when `value` is wrong for `key`."""
    nested: dict[str, Any] = {}
    node = nested
    *parents, leaf = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    found = problems(nested)
    if found:
        raise ConfigError(found[0].line(origin))
