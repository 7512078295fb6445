"""The `web.*` settings the web tools follow, and the domain rules (`web.allow`, `web.deny`).

A rule names a domain and covers its subdomains: `example.org` matches `example.org` and
`docs.example.org`, never `badexample.org`. Names are compared lowercased, without a trailing
dot, so `Example.ORG.` is `example.org`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from talaria.config_schema import default_for

if TYPE_CHECKING:
    from talaria.config import Config


@dataclass(frozen=True, slots=True)
class WebSettings:
    """The `web.*` settings of one agent (see docs/web.md); a keyword left out is the
    schema's default."""

    enabled: bool = default_for("web.enabled")
    """`web` is one of the default toolsets (otherwise only when named)."""
    allow_private: bool = default_for("web.allow_private") is True
    """Private, loopback and link-local addresses may be fetched."""
    private_hosts: tuple[str, ...] = ()
    """Domains whose private addresses may be fetched (`web.allow_private` as a list)."""
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ask_unknown: bool = default_for("web.ask_unknown")
    """A domain outside `allow` is asked about (in `manual` approvals) instead of refused."""
    timeout: float = float(default_for("web.timeout"))
    max_bytes: int = default_for("web.max_bytes")
    searxng_url: str | None = None

    @classmethod
    def from_config(cls, config: Config | None) -> WebSettings:
        if config is None:
            return cls()
        web = config.web
        private = web.allow_private
        return cls(
            enabled=web.enabled,
            allow_private=private is True,
            private_hosts=tuple(_domain(host) for host in private)
            if isinstance(private, list)
            else (),
            allow=tuple(_domain(rule) for rule in web.allow),
            deny=tuple(_domain(rule) for rule in web.deny),
            ask_unknown=web.ask_unknown,
            timeout=float(web.timeout),
            max_bytes=web.max_bytes,
            searxng_url=web.search.searxng_url or None,
        )

    def denied(self, host: str) -> bool:
        return _matches(_domain(host), self.deny)

    def private_ok(self, host: str) -> bool:
        """`host` may be fetched at a private, loopback or link-local address."""
        return self.allow_private or _matches(_domain(host), self.private_hosts)

    def known(self, host: str) -> bool:
        """`host` is allowed without asking: it matches `web.allow`, or there is no allow
        list and unknown domains are not asked about."""
        if not self.allow:
            return not self.ask_unknown
        return _matches(_domain(host), self.allow)


def _domain(name: str) -> str:
    return name.strip().lower().rstrip(".")


def _matches(host: str, rules: tuple[str, ...]) -> bool:
    return any(host == rule or host.endswith("." + rule) for rule in rules if rule)
