"""Where a fresh API key comes from after a 401/403, before giving up on a provider.

Keys rotate (a vault lease expires, the user exports a new one, an OAuth token is renewed), so
an auth failure is first answered by looking for a key that differs from the one that failed:
a user callable, then a shell command, then the config file, then the environment. A source
that fails is logged and skipped: a refresh must never crash the turn.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from talaria.providers.errors import ProviderError
from talaria.providers.factory import ProviderSpec

log = logging.getLogger("talaria.providers")

COMMAND_TIMEOUT = 30.0


@dataclass
class CredentialSource:
    """The places one chain entry's key can be re-read from, in the order they are tried."""

    refresh: Callable[[], str | None] | None = None
    """A user function returning the current key (config ``model.api_key_refresh``)."""
    command: str | None = None
    """A shell command printing the key (``model.api_key_command`` / ``api_key_command``)."""
    read_config: Callable[[], str | None] | None = None
    """Re-reads the key from the config file (it may have been edited since start-up)."""
    env: Callable[[], Mapping[str, str]] = field(default=lambda: os.environ)

    def fresh_key(self, spec: ProviderSpec) -> str | None:
        """The first key from a source that differs from the spec's current one."""
        for name, read in (
            ("api_key_refresh", self._from_callable),
            ("api_key_command", self._from_command),
            ("config", self._from_config),
            ("environment", lambda: self._from_env(spec)),
        ):
            try:
                key = read()
            except Exception as exc:
                log.warning("refreshing the key of %s from %s failed: %s", spec.label, name, exc)
                continue
            key = key.strip() if isinstance(key, str) else None
            if key and key != spec.api_key:
                log.info("refreshed the key of %s from %s", spec.label, name)
                return key
        return None

    def _from_callable(self) -> str | None:
        return self.refresh() if self.refresh is not None else None

    def _from_command(self) -> str | None:
        if not self.command:
            return None
        done = subprocess.run(
            self.command,
            shell=True,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"exit status {done.returncode}: {done.stderr.strip()[:200]}")
        lines = done.stdout.strip().splitlines()
        return lines[0] if lines else None

    def _from_config(self) -> str | None:
        return self.read_config() if self.read_config is not None else None

    def _from_env(self, spec: ProviderSpec) -> str | None:
        """The provider's key variable; never the placeholder sent to keyless local servers."""
        from talaria.providers.resolve import LOCAL_KEY, resolve_endpoint

        try:
            _, _, key = resolve_endpoint(spec.provider, spec.base_url, None, self.env())
        except ProviderError:
            return None
        return None if key == LOCAL_KEY else key
