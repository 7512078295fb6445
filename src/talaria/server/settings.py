"""What the server is told to do: address, key, CORS, limits, approval rule.

Read from `server.*` in the config file, the environment (`TALARIA_SERVER_KEY`) and the command
line; `refusal` says, in one line, why a setting must not be served (an open port with no key).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from talaria.values import mutable

MIN_KEY_LENGTH = 16
DEFAULT_BODY_LIMIT = 4 * 1024 * 1024
APPROVAL_RULES = ("deny", "off")
"""`deny`: OpenAI-compatible turns cannot ask anyone, so approvals are denied (the headless
rule) while runs ask their client; `off`: nothing is asked anywhere (the hard floor holds)."""


@mutable(slots=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8642
    api_key: str | None = None
    cors_origins: list[str] = field(default_factory=list)
    max_body_bytes: int = DEFAULT_BODY_LIMIT
    approvals: str = "deny"
    max_live_sessions: int = 256
    """Agents kept in memory; the least recently used idle one is closed past this."""
    run_retention_s: float = 900.0
    """How long a finished run's events stay available for (re)connecting clients."""
    max_run_events: int = 20_000
    agent_name: str = "talaria"

    @classmethod
    def from_config(
        cls, config_get: Any, env: Mapping[str, str] | None = None, **overrides: Any
    ) -> ServerSettings:
        """`config_get` is `Config.get`; `overrides` (command-line values) win when not None."""
        env = os.environ if env is None else env
        settings = cls(
            api_key=env.get("TALARIA_SERVER_KEY") or config_get("server.api_key") or None,
            cors_origins=[str(o) for o in config_get("server.cors_origins", []) or []],
            max_body_bytes=int(config_get("server.max_body_bytes", DEFAULT_BODY_LIMIT)),
            approvals=str(config_get("server.approvals", "deny")),
            max_live_sessions=int(config_get("server.max_live_sessions", 256)),
            run_retention_s=float(config_get("server.run_retention", 900.0)),
        )
        settings.host = str(config_get("server.host", settings.host))
        settings.port = int(config_get("server.port", settings.port))
        for name, value in overrides.items():
            if value is not None:
                setattr(settings, name, value)
        return settings

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
