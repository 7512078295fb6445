"""Where a wire client sends its requests and with which headers, per provider.

What the official SDKs sent, kept equivalent so that providers see the same requests:
bearer auth for OpenAI-style servers; ``x-api-key`` (and the bearer header, which
Anthropic-compatible servers often read instead) plus ``anthropic-version`` for Anthropic;
Azure OpenAI's ``api-key`` header and ``api-version`` query; config ``default_headers`` last,
so they can override any of these. OpenRouter also gets talaria's attribution header.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit, urlunsplit

ANTHROPIC_VERSION = "2026-10-21"
"""The Messages API version the anthropic SDK talaria was built against sends."""

AZURE_HOST_SUFFIXES = (
    ".openai.azure.com",
    ".cognitiveservices.azure.com",
    ".services.ai.azure.com",
)
OPENROUTER_HEADERS = {"X-Title": "talaria"}
"""OpenRouter's app attribution; add ``HTTP-Referer`` through ``default_headers``."""


@dataclass(frozen=True)
class Endpoint:
    """A base URL (without its query) and what every request to it carries."""

    base_url: str
    headers: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    problem: str | None = None
    """The configuration error every request would fail with (no key at all)."""

    def url(self, path: str) -> str:
        return self.base_url + path


def openai_endpoint(
    base_url: str,
    api_key: str | None,
    *,
    provider: str = "",
    default_headers: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Endpoint:
    """An OpenAI-style endpoint (Chat Completions, Responses, and the servers that copy them);
    without ``api_key`` the key comes from ``OPENAI_API_KEY``, as with the official SDK."""
    env = os.environ if env is None else env
    api_key = api_key or env.get("OPENAI_API_KEY")
    url, params = _split_query(base_url)
    host = (urlsplit(url).hostname or "").lower()
    headers: dict[str, str] = {}
    if provider == "azure" or host.endswith(AZURE_HOST_SUFFIXES):
        if api_key:
            headers["api-key"] = api_key
        version = env.get("OPENAI_API_VERSION")
        if version and "api-version" not in params:
            params["api-version"] = version
    elif api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    if provider == "openrouter" or host == "openrouter.ai":
        headers.update(OPENROUTER_HEADERS)
    headers.update(default_headers or {})
    problem = None if api_key else "no API key: pass api_key=... or set OPENAI_API_KEY"
    return Endpoint(url, headers, params, problem)


def anthropic_endpoint(
    base_url: str, api_key: str | None, *, default_headers: Mapping[str, str] | None = None
) -> Endpoint:
    """An Anthropic Messages endpoint; ``base_url`` excludes the ``/v1`` path."""
    url, params = _split_query(base_url)
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    if api_key:
        headers.update({"x-api-key": api_key, "Authorization": f"Bearer {api_key}"})
    headers.update(default_headers or {})
    return Endpoint(url, headers, params)


def _split_query(base_url: str) -> tuple[str, dict[str, str]]:
    """The URL without its query (paths are appended to it) and the query as parameters."""
    parts = urlsplit(base_url)
    bare = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
    return bare, dict(parse_qsl(parts.query))
