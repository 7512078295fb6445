"""API-mode and endpoint resolution: the documented order, defaults and environment."""

from __future__ import annotations

import pytest

from talaria.providers.errors import ErrorKind, ProviderError
from talaria.providers.resolve import LOCAL_KEY, resolve_api_mode, resolve_endpoint


@pytest.mark.parametrize(
    ("api_mode", "provider", "base_url", "expected"),
    [
        # 1. explicit wins over everything
        ("codex_responses", "anthropic", "https://api.anthropic.com", "codex_responses"),
        ("chat_completions", None, "https://api.anthropic.com", "chat_completions"),
        # 2. the provider wins over the URL
        (None, "anthropic", "https://proxy.example.com/v1", "anthropic_messages"),
        (None, "openai-codex", None, "codex_responses"),
        (None, "codex", None, "codex_responses"),
        (None, "openrouter", "https://api.anthropic.com", "chat_completions"),
        (None, "Anthropic", None, "anthropic_messages"),
        (None, "ollama", None, "chat_completions"),
        (None, "lmstudio", None, "chat_completions"),
        # 3. base-URL heuristics when the provider says nothing
        (None, None, "https://api.anthropic.com", "anthropic_messages"),
        (None, "custom-llm", "https://api.anthropic.com/", "anthropic_messages"),
        (None, None, "https://api.minimax.io/anthropic", "anthropic_messages"),
        (None, None, "https://api.z.ai/api/anthropic/", "anthropic_messages"),
        (None, None, "https://chatgpt.com/backend-api/codex", "codex_responses"),
        (None, None, "https://chatgpt.com/other", "chat_completions"),
        # 4. the default
        (None, None, "http://127.0.0.1:8080/v1", "chat_completions"),
        (None, None, None, "chat_completions"),
    ],
)
def test_api_mode_resolution_order(
    api_mode: str | None, provider: str | None, base_url: str | None, expected: str
) -> None:
    assert resolve_api_mode(api_mode, provider, base_url, "some-model") == expected


def test_unknown_api_mode_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError) as caught:
        resolve_api_mode("responses", None, None)
    message = str(caught.value)
    assert "'responses'" in message
    for mode in ("chat_completions", "codex_responses", "anthropic_messages"):
        assert mode in message


ENV = {
    "OPENAI_API_KEY": "sk-openai",
    "ANTHROPIC_API_KEY": "sk-ant",
    "OPENROUTER_API_KEY": "sk-or",
}


@pytest.mark.parametrize(
    ("provider", "base_url", "env", "expected"),
    [
        ("openai", None, ENV, ("openai", "https://api.openai.com/v1", "sk-openai")),
        ("anthropic", None, ENV, ("anthropic", "https://api.anthropic.com", "sk-ant")),
        ("openrouter", None, ENV, ("openrouter", "https://openrouter.ai/api/v1", "sk-or")),
        (None, None, ENV, ("openai", "https://api.openai.com/v1", "sk-openai")),
        # provider inferred from the base URL
        (
            None,
            "https://api.anthropic.com/",
            ENV,
            ("anthropic", "https://api.anthropic.com", "sk-ant"),
        ),
        (
            None,
            "https://openrouter.ai/api/v1",
            ENV,
            ("openrouter", "https://openrouter.ai/api/v1", "sk-or"),
        ),
        (
            None,
            "https://llm.corp.example/v1",
            ENV,
            ("custom", "https://llm.corp.example/v1", "sk-openai"),
        ),
        # OPENAI_BASE_URL is honoured for openai and custom, not for others
        (
            "openai",
            None,
            {**ENV, "OPENAI_BASE_URL": "https://gateway.example/v1"},
            ("openai", "https://gateway.example/v1", "sk-openai"),
        ),
        (
            "custom",
            None,
            {"OPENAI_BASE_URL": "http://localhost:9000/v1"},
            ("custom", "http://localhost:9000/v1", LOCAL_KEY),
        ),
        (
            "openrouter",
            None,
            {**ENV, "OPENAI_BASE_URL": "https://gateway.example/v1"},
            ("openrouter", "https://openrouter.ai/api/v1", "sk-or"),
        ),
        # local servers need no key
        ("ollama", None, {}, ("ollama", "http://127.0.0.1:11434/v1", LOCAL_KEY)),
        ("llamacpp", None, {}, ("llamacpp", "http://127.0.0.1:8080/v1", LOCAL_KEY)),
        (None, "http://127.0.0.1:8000/v1", {}, ("custom", "http://127.0.0.1:8000/v1", LOCAL_KEY)),
        (None, "http://[::1]:8000/v1", {}, ("custom", "http://[::1]:8000/v1", LOCAL_KEY)),
        # other providers read <NAME>_API_KEY
        (
            "deepseek",
            "https://api.deepseek.com/v1",
            {"DEEPSEEK_API_KEY": "sk-ds"},
            ("deepseek", "https://api.deepseek.com/v1", "sk-ds"),
        ),
    ],
)
def test_endpoint_defaults_and_environment(
    provider: str | None,
    base_url: str | None,
    env: dict[str, str],
    expected: tuple[str, str, str],
) -> None:
    assert resolve_endpoint(provider, base_url, None, env) == expected


def test_explicit_key_and_url_win_over_the_environment() -> None:
    assert resolve_endpoint("openai", "https://mine.example/v1", "sk-mine", ENV) == (
        "openai",
        "https://mine.example/v1",
        "sk-mine",
    )


@pytest.mark.parametrize(
    ("provider", "base_url", "env", "hint"),
    [
        ("openai", None, {}, "OPENAI_API_KEY"),
        ("anthropic", None, {"OPENAI_API_KEY": "sk"}, "ANTHROPIC_API_KEY"),
        (None, "https://llm.corp.example/v1", {}, "OPENAI_API_KEY"),
        ("custom", None, {"OPENAI_API_KEY": "sk"}, "base_url"),
        ("deepseek", None, {"DEEPSEEK_API_KEY": "sk"}, "base_url"),
    ],
)
def test_missing_configuration_is_a_config_error_that_says_what_to_set(
    provider: str | None, base_url: str | None, env: dict[str, str], hint: str
) -> None:
    with pytest.raises(ProviderError) as caught:
        resolve_endpoint(provider, base_url, None, env)
    assert caught.value.kind is ErrorKind.CONFIG
    assert hint in caught.value.message
