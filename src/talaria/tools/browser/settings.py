"""The `browser.*` settings: kept apart so that offering the tools imports nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class BrowserSettings:
    """The `browser.*` settings (see docs/browser.md)."""

    enabled: bool = False
    executable: str = ""
    headless: bool = True
    timeout: float = 30.0

    @classmethod
    def from_config(cls, config: Any) -> BrowserSettings:
        if config is None:
            return cls()
        return cls(
            enabled=bool(config.get("browser.enabled")),
            executable=str(config.get("browser.executable") or ""),
            headless=bool(config.get("browser.headless")),
            timeout=float(config.get("browser.timeout")),
        )
