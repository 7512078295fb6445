"""`ModelProfile`: what one model behind one endpoint accepts, as named facts.

The wire adapters read these attributes instead of testing model names or hosts. A profile is
resolved once per client from the rule table (`profiles.table`); users override single facts
per model in config, in a ``profiles:`` section keyed by model id or glob pattern::

    profiles:
      "qwen3*": {supports_tool_choice: false, output_limit_field: max_tokens}

validated here so that a misspelt key is one clear error naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from fnmatch import fnmatchcase
from typing import Any

from talaria.providers.errors import ErrorKind, ProviderError

OUTPUT_LIMIT_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """The request-building facts for one (provider, model, base URL, wire API)."""

    output_limit_field: str = "max_tokens"
    """The body field that carries ``model.max_tokens``: OpenAI and Azure read
    ``max_completion_tokens`` (their reasoning models reject ``max_tokens``), compatible
    servers ``max_tokens``, the Responses API ``max_output_tokens``."""
    output_limit_default: int | None = None
    """The output limit sent when ``model.max_tokens`` is unset, on wire APIs that require one
    (Anthropic Messages): the largest the model accepts without a beta header."""
    output_limit_from_window: bool = False
    """When ``model.max_tokens`` is unset, send a fraction of the context window as the output
    limit (`loop.output_limit`): local and custom servers generate until the window is full
    otherwise, and a small model that starts repeating itself never stops."""
    supports_temperature: bool = True
    """False for models that reject sampling settings (OpenAI's reasoning models)."""
    supports_tool_choice: bool = True
    """False: ``tool_choice`` is never sent, and a call that must not use tools offers none."""
    parallel_tool_calls: bool | None = None
    """Sent with the tools when set (the Responses API: true); false asks for one call at a
    time (on Anthropic Messages as ``disable_parallel_tool_use``)."""
    stream_usage: bool = True
    """Chat Completions: ask for the usage chunk (``stream_options.include_usage``)."""
    cache_markers: bool = False
    """Put ``cache_control`` breakpoints in the request (Anthropic Messages, and Claude behind
    Chat Completions endpoints such as OpenRouter); elsewhere caching is automatic or absent."""
    encrypted_reasoning: bool = False
    """Responses API: ask for ``reasoning.encrypted_content`` and replay the items to the
    endpoint that issued them (reasoning models only; others reject the include)."""
    text_tool_calls: bool = False
    """Read a tool call the model wrote as text (small models on local servers)."""
    billed: bool = True
    """False on the user's own hardware (Ollama, llama.cpp, vLLM, LM Studio): cost $0.00."""


PROFILE_KEYS = tuple(f.name for f in fields(ModelProfile))
_DEFAULTS = ModelProfile()


def describe(profile: ModelProfile) -> str:
    """The facts that differ from a plain compatible server, as ``doctor`` shows them."""
    changed = [
        f"{key}={_yaml_text(getattr(profile, key))}"
        for key in PROFILE_KEYS
        if getattr(profile, key) != getattr(_DEFAULTS, key)
    ]
    return " · ".join(changed) or "no quirks (a plain compatible server)"


def _yaml_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


_BOOLEAN = ("true or false", lambda v: isinstance(v, bool))
_CHECKS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "output_limit_field": (" | ".join(OUTPUT_LIMIT_FIELDS), lambda v: v in OUTPUT_LIMIT_FIELDS),
    "output_limit_default": (
        "a positive whole number or null",
        lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v > 0),
    ),
    "parallel_tool_calls": ("true, false or null", lambda v: v is None or isinstance(v, bool)),
}
"""What each key accepts; the keys not listed are booleans."""


def profile_problem(overrides: Any, where: str) -> str | None:
    """Why ``overrides`` (the facts at ``where``) cannot be used, in one line; None if it can."""
    if not isinstance(overrides, Mapping):
        return f"{where}: found {overrides!r}, expected a mapping of profile facts"
    for key, value in overrides.items():
        if key not in PROFILE_KEYS:
            from difflib import get_close_matches  # only a bad profile key needs it

            close = get_close_matches(str(key), PROFILE_KEYS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            return f"{where}.{key}: unknown profile fact{hint}; known: {', '.join(PROFILE_KEYS)}"
        expected, check = _CHECKS.get(key, _BOOLEAN)
        if not check(value):
            return f"{where}.{key}: found {value!r}, expected {expected}"
    return None


def profiles_problem(profiles: Any) -> str | None:
    """Why a ``profiles:`` section cannot be used, naming the entry and the key."""
    if not isinstance(profiles, Mapping):
        return f"profiles: found {profiles!r}, expected a mapping of model pattern -> facts"
    for pattern, overrides in profiles.items():
        problem = profile_problem(overrides, f"profiles.{pattern}")
        if problem:
            return problem
    return None


def overrides_for(profiles: Mapping[str, Any] | None, model: str) -> dict[str, Any]:
    """The facts every ``profiles:`` entry matching ``model`` sets, in the order written.

    A pattern matches the id as configured or without its ``vendor/`` prefix, ignoring case.
    The whole section is checked, so a typo surfaces whichever model runs: a `ProviderError`
    (CONFIG) that names the entry and the key.
    """
    if not profiles:
        return {}
    problem = profiles_problem(profiles)
    if problem:
        raise ProviderError(problem, kind=ErrorKind.CONFIG)
    names = {model.lower(), model.rpartition("/")[2].lower()}
    merged: dict[str, Any] = {}
    for pattern, overrides in profiles.items():
        if any(fnmatchcase(name, str(pattern).lower()) for name in names):
            merged.update(overrides)
    return merged


def checked_overrides(overrides: Any) -> tuple[tuple[str, Any], ...]:
    """The overrides as a sorted, hashable tuple; a `ProviderError` (CONFIG) for a bad one."""
    if not overrides:
        return ()
    problem = profile_problem(overrides, "profile")
    if problem:
        raise ProviderError(problem, kind=ErrorKind.CONFIG)
    return tuple(sorted(overrides.items()))
