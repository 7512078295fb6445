"""`mcp_servers` as users write it for Claude Code and Codex, checked and expanded.

A name maps to `{command, args, env, cwd}` (stdio) or `{url, headers}` (streamable HTTP, or the
older HTTP+SSE transport with `type: sse`), plus
`enabled`, `timeout`, `startup_timeout`, `tools: {include, exclude}`, `approval: ask | allow`,
`allow_read_only`, the caps on what it offers the model (`max_tools`, `max_description_chars`,
`max_schema_chars`) and, for stdio, `sandbox` (run the server inside the command sandbox).
`${VAR}` (and `${VAR:-default}`) are expanded from the environment when the server starts; a
bad entry is one `ConfigError` naming the server and the field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from talaria.config import ConfigError

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_KNOWN_KEYS = frozenset(
    {
        "command",
        "args",
        "env",
        "cwd",
        "url",
        "headers",
        "enabled",
        "timeout",
        "startup_timeout",
        "tools",
        "approval",
        "allow_read_only",
        "protocol",
        "type",
        "max_tools",
        "max_description_chars",
        "max_schema_chars",
        "sandbox",
    }
)
APPROVALS = ("ask", "allow")
SANDBOXES = ("read-only", "workspace-write")
"""A stdio server's `sandbox:` besides true (the session's own mode) and false (none)."""
MAX_TOOLS = 128
"""Hosted APIs refuse a request with more tools than this."""
MAX_DESCRIPTION_CHARS = 2_000
MAX_SCHEMA_CHARS = 20_000
PROTOCOLS = ("auto", "legacy")
TYPES = ("stdio", "http", "sse")


@dataclass(frozen=True)
class ServerConfig:
    """One configured server. Exactly one of `command` (stdio) and `url` (HTTP) is set."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    enabled: bool = True
    timeout: float = 60.0
    """Seconds one tool call may take."""
    startup_timeout: float = 20.0
    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    approval: str = "ask"
    allow_read_only: bool = False
    """Run tools the server annotates read-only without asking, even with `approval: ask`."""
    protocol: str = "auto"
    """auto: the newest protocol the server speaks; legacy: the initialize handshake only."""
    sse: bool = False
    """The URL speaks the HTTP+SSE transport (MCP before 2025-03-26), not streamable HTTP."""
    max_tools: int = MAX_TOOLS
    """Tools offered to the model, at most (the first ones the server lists)."""
    max_description_chars: int = MAX_DESCRIPTION_CHARS
    max_schema_chars: int = MAX_SCHEMA_CHARS
    """A tool whose input schema is longer than this (as JSON) is left out."""
    sandbox: str | None = None
    """None: the server runs as the user; "session": inside the command sandbox as the
    session's sandbox settings say (workspace-write where they say full-access); or a mode."""

    @property
    def transport(self) -> str:
        if self.command:
            return "stdio"
        return "sse" if self.sse else "http"

    def offers(self, tool_name: str) -> bool:
        """Whether `tools: {include, exclude}` lets this server tool through."""
        if self.include is not None and tool_name not in self.include:
            return False
        return tool_name not in self.exclude

    def describe(self) -> str:
        """A one-line summary safe to print: header values and env values are never shown."""
        if self.command:
            return " ".join([self.command, *self.args])
        return str(self.url)


def expand(text: str, env: Mapping[str, str] | None = None) -> str:
    """`${VAR}` and `${VAR:-default}` from the environment; an unset VAR without default is
    an error (a server started with a blank token fails in confusing ways)."""
    source = os.environ if env is None else env

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = source.get(name)
        if value is None or (value == "" and default is not None):
            if default is None:
                raise ConfigError(f"environment variable {name} is not set (used as ${{{name}}})")
            return default
        return value

    return _VARIABLE.sub(replace, text)


def expanded(server: ServerConfig, env: Mapping[str, str] | None = None) -> ServerConfig:
    """The server with every `${VAR}` in command, args, env, cwd, url and headers filled in."""
    from dataclasses import replace

    def one(value: str | None) -> str | None:
        return expand(value, env) if value is not None else None

    try:
        return replace(
            server,
            command=one(server.command),
            args=tuple(expand(arg, env) for arg in server.args),
            env={key: expand(value, env) for key, value in server.env.items()},
            cwd=one(server.cwd),
            url=one(server.url),
            headers={key: expand(value, env) for key, value in server.headers.items()},
        )
    except ConfigError as exc:
        raise ConfigError(f"mcp_servers.{server.name}: {exc}") from None


def parse_servers(raw: Any) -> list[ServerConfig]:
    """The `mcp_servers` mapping as ServerConfigs, in the order written."""
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise ConfigError(f"mcp_servers must be a mapping of name -> server, got {_kind(raw)}")
    return [_parse_one(str(name), entry) for name, entry in raw.items()]


def _parse_one(name: str, entry: Any) -> ServerConfig:
    where = f"mcp_servers.{name}"
    if not name.strip():
        raise ConfigError("mcp_servers: a server needs a non-empty name")
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where} must be a mapping, got {_kind(entry)}")
    unknown = sorted(set(entry) - _KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
    command, url = entry.get("command"), entry.get("url")
    if bool(command) == bool(url):
        raise ConfigError(f"{where} needs exactly one of 'command' (stdio) or 'url' (HTTP)")
    tools = entry.get("tools") or {}
    if not isinstance(tools, Mapping):
        raise ConfigError(f"{where}.tools must be a mapping with include/exclude lists")
    approval = entry.get("approval", "ask")
    if approval not in APPROVALS:
        raise ConfigError(f"{where}.approval must be 'ask' or 'allow', got {approval!r}")
    protocol = entry.get("protocol", "auto")
    if protocol not in PROTOCOLS:
        raise ConfigError(f"{where}.protocol must be 'auto' or 'legacy', got {protocol!r}")
    include = tools.get("include")
    sse = _transport_type(where, entry.get("type"), bool(command)) == "sse"
    sandbox = _sandbox(where, entry.get("sandbox", False), bool(command))
    return ServerConfig(
        name=name,
        command=_string(where, "command", command) if command else None,
        args=tuple(_strings(where, "args", entry.get("args") or [])),
        env=_mapping(where, "env", entry.get("env") or {}),
        cwd=_string(where, "cwd", entry["cwd"]) if entry.get("cwd") else None,
        url=_string(where, "url", url) if url else None,
        headers=_mapping(where, "headers", entry.get("headers") or {}),
        enabled=_flag(where, "enabled", entry.get("enabled", True)),
        timeout=_seconds(where, "timeout", entry.get("timeout", 60.0)),
        startup_timeout=_seconds(where, "startup_timeout", entry.get("startup_timeout", 20.0)),
        include=tuple(_strings(where, "tools.include", include)) if include is not None else None,
        exclude=tuple(_strings(where, "tools.exclude", tools.get("exclude") or [])),
        approval=str(approval),
        allow_read_only=_flag(where, "allow_read_only", entry.get("allow_read_only", False)),
        protocol=str(protocol),
        sse=sse,
        max_tools=_count(where, "max_tools", entry.get("max_tools", MAX_TOOLS)),
        max_description_chars=_count(
            where,
            "max_description_chars",
            entry.get("max_description_chars", MAX_DESCRIPTION_CHARS),
        ),
        max_schema_chars=_count(
            where, "max_schema_chars", entry.get("max_schema_chars", MAX_SCHEMA_CHARS)
        ),
        sandbox=sandbox,
    )


def _sandbox(where: str, value: Any, has_command: bool) -> str | None:
    if value is False:
        return None
    if value is not True and value not in SANDBOXES:
        choices = ", ".join(("true", "false", *SANDBOXES))
        raise ConfigError(f"{where}.sandbox must be one of {choices}, got {value!r}")
    if not has_command:
        raise ConfigError(f"{where}.sandbox applies to stdio servers (a command) only")
    return "session" if value is True else str(value)


def _count(where: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}.{key} must be a whole number of at least 1, got {value!r}")
    return value


def _transport_type(where: str, value: Any, has_command: bool) -> str:
    """`type` as Claude Code writes it: optional, and it must agree with command/url."""
    implied = "stdio" if has_command else "http"
    if value is None:
        return implied
    if value not in TYPES:
        raise ConfigError(f"{where}.type must be one of {', '.join(TYPES)}, got {value!r}")
    if (value == "stdio") != has_command:
        needs = "'command'" if value == "stdio" else "'url'"
        raise ConfigError(f"{where}.type {value} needs {needs}")
    return str(value)


def _kind(value: Any) -> str:
    return type(value).__name__


def _string(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where}.{key} must be a string, got {_kind(value)}")
    return value


def _strings(where: str, key: str, value: Any) -> list[str]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}.{key} must be a list of strings")
    return list(value)


def _mapping(where: str, key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}.{key} must be a mapping of strings")
    return {str(k): str(v) for k, v in value.items()}


def _flag(where: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}.{key} must be true or false, got {value!r}")
    return value


def _seconds(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{where}.{key} must be a positive number of seconds, got {value!r}")
    return float(value)
