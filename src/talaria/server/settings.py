"""What the server is told to do: address, key, allowed hosts and origins, limits, approval rule.

Read from `server.*` in the config file, the environment (`TALARIA_SERVER_KEY`) and the command
line; `refusal` says, in one line, why a setting must not be served (an open port with no key).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from talaria.config_schema import default_for
from talaria.messages.redact import remember_secret

if TYPE_CHECKING:
    from talaria.config import Config

MIN_KEY_LENGTH = 16
APPROVAL_RULES = ("deny", "off")
"""`deny`: OpenAI-compatible turns cannot ask anyone, so approvals are denied (the headless
rule) while runs ask their client; `off`: nothing is asked anywhere (the hard floor holds)."""


@dataclass(slots=True)
class ServerSettings:
    """The `server.*` settings (`from_config`); a keyword left out is the schema's default."""

    host: str = default_for("server.host")
    port: int = default_for("server.port")
    api_key: str | None = None
    """None: `ensure_key` makes a random one for this launch (no server runs keyless)."""
    allowed_hosts: list[str] = field(default_factory=list)
    """Host names (besides localhost and IP addresses) that requests may name in `Host`."""
    allowed_origins: list[str] = field(default_factory=list)
    """Browser origins, besides the server's own, that may call it (CORS and writes)."""
    max_body_bytes: int = default_for("server.max_body_bytes")
    header_timeout_s: float = float(default_for("server.header_timeout"))
    """A connection that has not sent a whole request head by then is closed (slowloris)."""
    keep_alive_s: int = default_for("server.keep_alive_timeout")
    max_connections: int = default_for("server.max_connections")
    """Open connections (or requests in flight) past which new requests get 503."""
    approvals: str = default_for("server.approvals")
    max_live_sessions: int = default_for("server.max_live_sessions")
    """Agents kept in memory; the least recently used idle one is closed past this."""
    run_retention_s: float = float(default_for("server.run_retention"))
    """How long a finished run's events stay available for (re)connecting clients."""
    max_run_events: int = 20_000
    """The latest events of a run kept for clients that (re)connect (not a setting)."""
    agent_name: str = "talaria"
    """The model name the OpenAI-compatible endpoints answer with (not a setting)."""

    @classmethod
    def from_config(
        cls, config: Config, env: Mapping[str, str] | None = None, **overrides: Any
    ) -> ServerSettings:
        """The `server.*` settings (the schema's defaults where unset); `overrides`
        (command-line values) win when not None."""
        env = os.environ if env is None else env
        server = config.server
        settings = cls(
            host=server.host,
            port=server.port,
            api_key=env.get("TALARIA_SERVER_KEY") or server.api_key or None,
            allowed_hosts=list(server.allowed_hosts),
            allowed_origins=[*server.allowed_origins, *server.cors_origins],
            max_body_bytes=server.max_body_bytes,
            header_timeout_s=float(server.header_timeout),
            keep_alive_s=server.keep_alive_timeout,
            max_connections=server.max_connections,
            approvals=server.approvals,
            max_live_sessions=server.max_live_sessions,
            run_retention_s=float(server.run_retention),
        )
        for name, value in overrides.items():
            if value is not None:
                setattr(settings, name, value)
        return settings

    def ensure_key(self) -> str:
        """The server's key: the configured one, else a random one made now for this launch.

        Without a key any web page the user visits could drive a loopback server (a
        cross-origin POST, or DNS rebinding), so the key is never optional: a launch without
        one prints the page's address with its key instead (`talaria serve`)."""
        if not self.api_key:
            self.api_key = secrets.token_urlsafe(32)
        remember_secret(self.api_key, "server-key")  # never in a tool result, plain or encoded
        return self.api_key

    def refusal(self) -> str | None:
        """Why these settings must not be served, or None."""
        if self.approvals not in APPROVAL_RULES:
            rules = ", ".join(APPROVAL_RULES)
            return f"server.approvals must be one of {rules}, got {self.approvals!r}"
        if self.max_live_sessions < 1 or self.max_body_bytes < 1024:
            return "server.max_live_sessions must be >= 1 and server.max_body_bytes >= 1024"
        if is_loopback(self.host):
            return None
        if not self.api_key or len(self.api_key) < MIN_KEY_LENGTH:
            return (
                f"refusing to listen on {self.host} without an API key of at least "
                f"{MIN_KEY_LENGTH} characters: set TALARIA_SERVER_KEY (or server.api_key), "
                "or bind to 127.0.0.1"
            )
        return None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
