"""From a provider spec (what the user configured) to a live client for its wire API."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from talaria.core import ModelClient
from talaria.messages.redact import remember_secret
from talaria.providers.profiles import ModelProfile, profile_for

_CLIENTS: dict[str, tuple[str, str]] = {
    "chat_completions": ("talaria.providers.wire.chat_completions", "ChatCompletionsClient"),
    "codex_responses": ("talaria.providers.wire.responses", "ResponsesClient"),
    "anthropic_messages": ("talaria.providers.wire.anthropic_messages", "AnthropicMessagesClient"),
}


@dataclass(frozen=True)
class ProviderSpec:
    """One fully resolved endpoint: provider name, model, URL, key and wire API."""

    provider: str
    model: str
    base_url: str
    api_key: str
    api_mode: str
    options: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    profile: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """The user's overrides of the resolved `ModelProfile` (from config ``profiles:``)."""

    def __post_init__(self) -> None:
        remember_secret(self.api_key)

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"

    def with_key(self, api_key: str) -> ProviderSpec:
        return replace(self, api_key=api_key)


def resolve_spec(
    *,
    model: str | None,
    provider: str | None,
    base_url: str | None,
    api_key: str | None,
    api_mode: str | None,
    env: dict[str, str] | None = None,
    options: Mapping[str, Any] | None = None,
    profiles: Mapping[str, Any] | None = None,
) -> ProviderSpec:
    """Fill in what the user left out, in the resolution order of docs/models.md. ``profiles`` is
    the config's ``profiles:`` section; a bad entry is a CONFIG `ProviderError` naming the key."""
    import os

    from talaria.providers.profiles.profile import overrides_for
    from talaria.providers.resolve import resolve_api_mode, resolve_endpoint

    if not model:
        from talaria.providers.errors import ErrorKind, ProviderError

        raise ProviderError(
            "no model configured: pass model=..., set model.default in config.yaml, "
            "or TALARIA_MODEL in the environment",
            kind=ErrorKind.CONFIG,
        )
    resolved_provider, resolved_url, resolved_key = resolve_endpoint(
        provider, base_url, api_key, dict(os.environ) if env is None else env
    )
    mode = resolve_api_mode(api_mode, resolved_provider, resolved_url, model)
    overrides = overrides_for(profiles, model)
    return ProviderSpec(
        provider=resolved_provider,
        model=model,
        base_url=resolved_url,
        api_key=resolved_key,
        api_mode=mode,
        options=dict(options or {}),
        profile=overrides,
    )


def build_client(spec: ProviderSpec) -> ModelClient:
    """The client for the spec's wire API; `options` (config `model.options`) are passed to its
    constructor, e.g. timeout, default_headers, extra_body, or Anthropic's thinking."""
    module_name, class_name = _CLIENTS[spec.api_mode]
    client_class = getattr(importlib.import_module(module_name), class_name)
    accepted = set(inspect.signature(client_class).parameters) - _FIXED
    unknown = sorted(set(spec.options) - accepted)
    if unknown:
        from talaria.providers.errors import ErrorKind, ProviderError

        raise ProviderError(
            f"model.options {', '.join(unknown)} not understood by {spec.api_mode}; "
            f"it accepts: {', '.join(sorted(accepted))}",
            kind=ErrorKind.CONFIG,
            provider=spec.provider,
            model=spec.model,
        )
    client: ModelClient = client_class(
        spec.model,
        base_url=spec.base_url,
        api_key=spec.api_key,
        provider=spec.provider,
        profile=profile_of_spec(spec),
        **spec.options,
    )
    return client


def profile_of_spec(spec: ProviderSpec) -> ModelProfile:
    """The spec's resolved profile: the rule table's facts with the user's overrides on top."""
    return profile_for(
        provider=spec.provider,
        model=spec.model,
        base_url=spec.base_url,
        api_mode=spec.api_mode,
        overrides=spec.profile,
    )


_FIXED = frozenset({"model", "base_url", "api_key", "provider", "profile"})
