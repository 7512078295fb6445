"""What `/model` can switch to: the endpoint the chat started with, the configured main model,
the fallbacks and the named providers (config `providers: {name: {model, base_url, ...}}`).

A choice is a whole endpoint (model, provider, base URL, key, API mode), so switching away to
another provider and back restores the local server's URL instead of losing it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from talaria.config import Config

KNOWN_PROVIDERS = frozenset(
    {
        "openai",
        "anthropic",
        "openrouter",
        "custom",
        "codex",
        "openai-codex",
        "ollama",
        "vllm",
        "llamacpp",
        "lmstudio",
    }
)
"""Provider names `/model provider:model` recognises (model ids may contain ':' too)."""


@dataclass(frozen=True)
class ModelChoice:
    name: str
    """"start", "main", "fallback 1", ..., or the name of a configured provider."""
    model: str
    provider: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    api_mode: str | None = None

    @property
    def provider_name(self) -> str:
        """The provider as resolution will name it (a bare base URL is "custom")."""
        if self.provider:
            return self.provider.lower()
        from talaria.providers.resolve import resolve_endpoint

        try:
            return resolve_endpoint(None, self.base_url, self.api_key or "-")[0]
        except Exception:
            return "custom"

    @property
    def label(self) -> str:
        return f"{self.provider_name}:{self.model}"

    def agent_kwargs(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "provider": self.provider,
            "base_url": self.base_url,
            "api_key": self.api_key,
            "api_mode": self.api_mode,
        }


def _entry(name: str, raw: Any) -> ModelChoice | None:
    if not isinstance(raw, dict) or not raw.get("model"):
        return None
    return ModelChoice(
        name,
        str(raw["model"]),
        raw.get("provider"),
        raw.get("base_url"),
        raw.get("api_key"),
        raw.get("api_mode"),
    )


def model_choices(start: dict[str, Any], config: Config) -> list[ModelChoice]:
    """Every configured endpoint, the starting one first, without duplicates."""
    found: list[ModelChoice | None] = [
        _entry("start", {**start, "model": start.get("model") or config.model.default}),
        _entry(
            "main",
            {
                "model": config.model.default,
                "provider": config.model.provider,
                "base_url": config.model.base_url,
                "api_key": config.model.api_key,
                "api_mode": config.model.api_mode,
            },
        ),
    ]
    for number, raw in enumerate(config.fallback_providers, 1):
        found.append(_entry(f"fallback {number}", raw))
    named = config.providers
    if isinstance(named, dict):
        found.extend(_entry(str(name), raw) for name, raw in named.items())
    choices: list[ModelChoice] = []
    for choice in found:
        if choice is not None and not any(_same(choice, seen) for seen in choices):
            choices.append(choice)
    return choices


def _same(a: ModelChoice, b: ModelChoice) -> bool:
    return (a.model, a.provider_name, (a.base_url or "").rstrip("/")) == (
        b.model,
        b.provider_name,
        (b.base_url or "").rstrip("/"),
    )


def pick(choices: Sequence[ModelChoice], ref: str, current: ModelChoice) -> ModelChoice:
    """The choice `ref` names: a choice's name or number, `provider:model`, a configured model
    id, a provider's name; otherwise `provider:model` or a bare model id on the endpoint of
    the same provider (or the current one)."""
    wanted = ref.strip()
    lowered = wanted.lower()
    if wanted.isdigit() and 1 <= int(wanted) <= len(choices):
        return choices[int(wanted) - 1]
    for matches in (
        lambda c: c.name.lower() == lowered,
        lambda c: c.label.lower() == lowered,
        lambda c: c.model == wanted,
        lambda c: c.provider_name == lowered,
    ):
        found = next((choice for choice in choices if matches(choice)), None)
        if found is not None:
            return found
    provider, model = split_model_ref(wanted)
    if provider is None:
        return replace(current, name="custom model", model=model)
    same = next((c for c in [current, *choices] if c.provider_name == provider), None)
    if same is not None:
        return replace(same, name=f"{provider} model", model=model)
    return ModelChoice(f"{provider} model", model, provider)


def split_model_ref(ref: str) -> tuple[str | None, str]:
    """`provider:model` or a bare model id (which may itself contain ':', e.g. qwen2:7b)."""
    provider, sep, model = ref.partition(":")
    if sep and model and provider.lower() in KNOWN_PROVIDERS:
        return provider.lower(), model
    return None, ref
