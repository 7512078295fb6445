"""Which wire API and which endpoint: the resolution order of docs/models.md, as tables.

Order for the API mode: an explicit ``api_mode`` > what the provider is known to speak > what
the base URL looks like > ``chat_completions`` (the lingua franca of compatible servers).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from talaria.providers.base import API_MODES
from talaria.providers.errors import ErrorKind, ProviderError

LOCAL_KEY = "not-needed"
"""The key sent to a loopback server that wants none (the SDKs refuse an empty key)."""

_PROVIDER_MODES: dict[str, str] = {
    "anthropic": "anthropic_messages",
    "openai-codex": "codex_responses",
    "codex": "codex_responses",
    "openai": "chat_completions",
    "openrouter": "chat_completions",
    "custom": "chat_completions",
    "ollama": "chat_completions",
    "vllm": "chat_completions",
    "llamacpp": "chat_completions",
    "lmstudio": "chat_completions",
}

_URL_MODES: tuple[tuple[Callable[[SplitResult], bool], str], ...] = (
    (lambda url: url.hostname == "api.anthropic.com", "anthropic_messages"),
    (lambda url: url.path.rstrip("/").endswith("/anthropic"), "anthropic_messages"),
    (
        lambda url: url.hostname == "chatgpt.com" and url.path.startswith("/backend-api/codex"),
        "codex_responses",
    ),
)


@dataclass(frozen=True, slots=True)
class _Endpoint:
    """A named provider's default base URL and where its key comes from."""

    base_url: str | None
    key_env: str | None
    """None: a local server that needs no key."""
    base_url_env: str | None = None


_ENDPOINTS: dict[str, _Endpoint] = {
    "openai": _Endpoint("https://api.openai.com/v1", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "custom": _Endpoint(None, "OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "openai-codex": _Endpoint("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "codex": _Endpoint("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "anthropic": _Endpoint("https://api.anthropic.com", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "openrouter": _Endpoint("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "ollama": _Endpoint("http://127.0.0.1:11434/v1", None),
    "vllm": _Endpoint("http://127.0.0.1:8000/v1", None),
    "llamacpp": _Endpoint("http://127.0.0.1:8080/v1", None),
    "lmstudio": _Endpoint("http://127.0.0.1:1234/v1", None),
}

_HOST_PROVIDERS: dict[str, str] = {
    "api.openai.com": "openai",
    "api.anthropic.com": "anthropic",
    "openrouter.ai": "openrouter",
    "chatgpt.com": "openai-codex",
}


def resolve_api_mode(
    api_mode: str | None,
    provider: str | None,
    base_url: str | None,
    model: str | None = None,
) -> str:
    """The wire API to speak; raises ValueError for an ``api_mode`` that is not one of ours.

    ``model`` is part of the signature so that callers pass everything they know; the documented
    order has no model rule, so it does not change the answer.
    """
    if api_mode:
        if api_mode not in API_MODES:
            raise ValueError(f"unknown api_mode {api_mode!r}; valid modes: {', '.join(API_MODES)}")
        return api_mode
    by_provider = _PROVIDER_MODES.get((provider or "").lower())
    if by_provider:
        return by_provider
    if base_url:
        url = urlsplit(base_url)
        for matches, mode in _URL_MODES:
            if matches(url):
                return mode
    return "chat_completions"


def resolve_endpoint(
    provider: str | None,
    base_url: str | None,
    api_key: str | None,
    env: Mapping[str, str] | None = None,
) -> tuple[str, str, str]:
    """Fill in provider, base URL and key from the defaults and the environment.

    Raises `ProviderError` (kind CONFIG) when no base URL or no key can be found: a missing
    credential is our side's problem and retrying cannot fix it.
    """
    env = os.environ if env is None else env
    name = (provider or _provider_for_url(base_url)).lower()
    endpoint = _ENDPOINTS.get(name, _Endpoint(None, f"{name.upper().replace('-', '_')}_API_KEY"))
    url = base_url or (env.get(endpoint.base_url_env) if endpoint.base_url_env else None)
    url = url or endpoint.base_url
    if not url:
        raise ProviderError(
            f"provider {name!r} needs a base_url (or OPENAI_BASE_URL in the environment)",
            kind=ErrorKind.CONFIG,
            provider=name,
        )
    url = url.rstrip("/")
    key = api_key or (env.get(endpoint.key_env) if endpoint.key_env else None)
    if not key and (endpoint.key_env is None or is_loopback(url)):
        key = LOCAL_KEY
    if not key:
        raise ProviderError(
            f"no API key for provider {name!r}: pass api_key=... or set {endpoint.key_env}",
            kind=ErrorKind.CONFIG,
            provider=name,
        )
    return name, url, key


def _provider_for_url(base_url: str | None) -> str:
    if not base_url:
        return "openai"
    return _HOST_PROVIDERS.get(urlsplit(base_url).hostname or "", "custom")


def is_loopback(base_url: str) -> bool:
    """True for localhost and loopback addresses, where local model servers listen."""
    host = urlsplit(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified
