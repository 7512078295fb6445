"""The one table of model-family and endpoint quirks, and `profile_for` that resolves it.

A profile starts from the defaults, then the rules apply in three layers, later facts winning:
the wire API's own facts, the model family's (matched on the model id without its vendor
prefix, so ``anthropic/claude-sonnet-4`` is a Claude), then the endpoint's (matched by provider
name or host: what the serving endpoint reads beats what the family would like), and last the
user's ``model.profile`` overrides. Within a layer rules apply in table order, so a more
specific family rule is listed after the general one it refines.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from talaria.providers.profiles.profile import ModelProfile, checked_overrides
from talaria.providers.transport.auth import AZURE_HOST_SUFFIXES

CHAT = "chat_completions"
RESPONSES = "codex_responses"
ANTHROPIC = "anthropic_messages"


@dataclass(frozen=True, slots=True)
class Rule:
    """Facts that hold wherever every given matcher matches (an absent matcher matches all)."""

    facts: Mapping[str, Any]
    api_modes: frozenset[str] = frozenset()
    model: str | None = None
    """A regular expression matched at the start of the lower-cased model id without its
    ``vendor/`` prefix (compiled when first matched: most rules never are in a process)."""
    providers: frozenset[str] = frozenset()
    hosts: tuple[str, ...] = field(default=())
    """Exact host names, or ``.suffix`` for a whole domain; a rule with providers and hosts
    matches either."""

    def matches(self, api_mode: str, model: str, provider: str, host: str) -> bool:
        if self.api_modes and api_mode not in self.api_modes:
            return False
        if self.model is not None and not re.match(self.model, model):
            return False
        if not (self.providers or self.hosts):
            return True
        return provider in self.providers or any(_host_matches(host, h) for h in self.hosts)


def _host_matches(host: str, pattern: str) -> bool:
    return host.endswith(pattern) if pattern.startswith(".") else host == pattern


def wire(api_mode: str, **facts: Any) -> Rule:
    return Rule(facts, api_modes=frozenset({api_mode}))


def family(pattern: str, **facts: Any) -> Rule:
    return Rule(facts, model=pattern)


def endpoint(
    *,
    providers: tuple[str, ...] = (),
    hosts: tuple[str, ...] = (),
    api_mode: str = "",
    **facts: Any,
) -> Rule:
    modes = frozenset({api_mode}) if api_mode else frozenset()
    return Rule(facts, api_modes=modes, providers=frozenset(providers), hosts=hosts)


_CLAUDE = r"(?:.*\.)?claude"
"""Claude ids, also with a cloud's dotted prefix (``us.anthropic.claude-sonnet-4-...``)."""
_REASONING = {"supports_temperature": False, "encrypted_reasoning": True}

WIRE_RULES: tuple[Rule, ...] = (
    wire(RESPONSES, output_limit_field="max_output_tokens", parallel_tool_calls=True),
    wire(ANTHROPIC, output_limit_default=8192, cache_markers=True),
)
"""What each wire API itself reads (Chat Completions is the defaults)."""

FAMILY_RULES: tuple[Rule, ...] = (
    family(r"o[134]\b", **_REASONING),
    family(r"gpt-5", **_REASONING),
    family(r"codex", **_REASONING),
    family(r"gpt-5(?:\.\d+)?-chat", supports_temperature=True, encrypted_reasoning=False),
    family(r"deepseek-reasoner", supports_temperature=False),
    family(_CLAUDE, cache_markers=True),
    family(_CLAUDE + r"-3-(?:haiku|opus|sonnet)", output_limit_default=4096),
    family(_CLAUDE + r"-3-5", output_limit_default=8192),
    family(_CLAUDE + r"-(?:3-7|sonnet-4|opus-4|haiku-4)", output_limit_default=16384),
)
"""Model families: OpenAI's reasoning models (no sampling settings, encrypted reasoning),
DeepSeek's reasoner (ignores sampling settings), Claude (explicit cache breakpoints, and the
output limit each generation accepts)."""

LOCAL_SERVERS = ("ollama", "llamacpp", "vllm", "lmstudio")

ENDPOINT_RULES: tuple[Rule, ...] = (
    endpoint(hosts=("api.openai.com",), api_mode=CHAT, output_limit_field="max_completion_tokens"),
    endpoint(
        providers=("azure",),
        hosts=AZURE_HOST_SUFFIXES,
        api_mode=CHAT,
        output_limit_field="max_completion_tokens",
    ),
    endpoint(
        providers=LOCAL_SERVERS, text_tool_calls=True, output_limit_from_window=True, billed=False
    ),
    endpoint(providers=("custom",), text_tool_calls=True, output_limit_from_window=True),
)
"""Endpoints: OpenAI's and Azure's own APIs take ``max_completion_tokens``; models on local
and custom servers may write tool calls as text and get an output limit from their window;
the user's own hardware costs nothing."""

RULES: tuple[Rule, ...] = WIRE_RULES + FAMILY_RULES + ENDPOINT_RULES


def profile_for(
    *,
    provider: str | None,
    model: str,
    base_url: str | None = None,
    api_mode: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> ModelProfile:
    """The profile for a model behind an endpoint; cached, so resolving is paid once.

    A bad override is a `ProviderError` (CONFIG) naming the key.
    """
    return _resolve(
        (provider or "").lower(),
        model.rpartition("/")[2].lower(),
        (urlsplit(base_url).hostname or "") if base_url else "",
        api_mode or CHAT,
        checked_overrides(overrides),
    )


def profile_of(client: Any) -> ModelProfile:
    """A client's profile; one supplied by the user (a test double, an adapter of their own)
    may have none, and gets the table's answer for what it says it is."""
    found = getattr(client, "profile", None)
    if isinstance(found, ModelProfile):
        return found
    return profile_for(
        provider=str(getattr(client, "provider", "")),
        model=str(getattr(client, "model", "")),
        base_url=getattr(client, "base_url", None),
        api_mode=getattr(client, "api_mode", None),
    )


@lru_cache(maxsize=256)
def _resolve(
    provider: str, model: str, host: str, api_mode: str, overrides: tuple[tuple[str, Any], ...]
) -> ModelProfile:
    facts: dict[str, Any] = {}
    for rule in RULES:
        if rule.matches(api_mode, model, provider, host):
            facts.update(rule.facts)
    facts.update(overrides)
    return replace(ModelProfile(), **facts)
