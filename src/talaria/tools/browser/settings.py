"""The `browser.*` settings: kept apart so that offering the tools imports nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from talaria.config import Config


@dataclass(frozen=True, slots=True)
class BrowserSettings:
    """The `browser.*` settings (see docs/browser.md)."""

    enabled: bool = False
    executable: str = ""
    headless: bool = True
    timeout: float = 30.0

    @classmethod
    def from_config(cls, config: Config | None) -> BrowserSettings:
        if config is None:
            return cls()
        browser = config.browser
        return cls(
            enabled=browser.enabled,
            executable=browser.executable or "",
            headless=browser.headless,
            timeout=float(browser.timeout),
        )
