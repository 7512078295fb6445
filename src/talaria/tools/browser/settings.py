"""The `browser.*` settings: kept apart so that offering the tools imports nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from talaria.config_schema import default_for

if TYPE_CHECKING:
    from talaria.config import Config


@dataclass(frozen=True, slots=True)
class BrowserSettings:
    """The `browser.*` settings (see docs/browser.md); a keyword left out is the schema's
    default."""

    enabled: bool = default_for("browser.enabled")
    executable: str = default_for("browser.executable") or ""
    """Empty: the first of the usual Chromium names on PATH."""
    headless: bool = default_for("browser.headless")
    timeout: float = float(default_for("browser.timeout"))

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
