"""Model profiles: the table resolves what real model/endpoint pairs accept, and each fact
changes the request that goes over the wire (the scripted provider, strict as the real APIs)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import scripted_agent, tool_results
from pty_terminal import TALARIA
from talaria import Agent
from talaria.config import ConfigError
from talaria.core import ModelRequest, Usage
from talaria.providers.base import NullStream
from talaria.providers.errors import ProviderError
from talaria.providers.pricing import estimate_cost
from talaria.providers.profiles import ModelProfile, profile_for
from talaria.providers.wire.chat_completions import ChatCompletionsClient
from talaria.providers.wire.responses import ResponsesClient
from talaria.testing import Fail, ScriptedProvider, call, text

OPENAI = "https://api.openai.com/v1"
AZURE = "https://contoso.openai.azure.com/openai/v1"
OPENROUTER = "https://openrouter.ai/api/v1"
ANTHROPIC = "https://api.anthropic.com"
REASONING = {"supports_temperature": False, "encrypted_reasoning": True}
RESPONSES = {"output_limit_field": "max_output_tokens", "parallel_tool_calls": True}
MESSAGES = {"cache_markers": True, "output_limit_default": 8192}
CUSTOM = {"text_tool_calls": True, "output_limit_from_window": True}
LOCAL = {**CUSTOM, "billed": False}

CASES: dict[str, tuple[str, str, str, str, dict[str, Any]]] = {
    "gpt-4.1 on openai": ("openai", "gpt-4.1", OPENAI, "chat_completions", {
        "output_limit_field": "max_completion_tokens"}),
    "o3 on openai": ("openai", "o3", OPENAI, "chat_completions", {
        "output_limit_field": "max_completion_tokens", **REASONING}),
    "o3 on the responses api": ("openai", "o3", OPENAI, "codex_responses", {
        **RESPONSES, **REASONING}),
    "gpt-5 on the responses api": ("openai", "gpt-5", OPENAI, "codex_responses", {
        **RESPONSES, **REASONING}),
    "gpt-5-codex": ("openai-codex", "gpt-5-codex", OPENAI, "codex_responses", {
        **RESPONSES, **REASONING}),
    "gpt-5-chat samples": ("openai", "gpt-5-chat-latest", OPENAI, "chat_completions", {
        "output_limit_field": "max_completion_tokens"}),
    "gpt-4.1 on the responses api": ("openai", "gpt-4.1", OPENAI, "codex_responses", RESPONSES),
    "claude-sonnet-4 on anthropic": ("anthropic", "claude-sonnet-4-20250514", ANTHROPIC,
        "anthropic_messages", {**MESSAGES, "output_limit_default": 16384}),
    "claude-3-haiku on anthropic": ("anthropic", "claude-3-haiku-20240307", ANTHROPIC,
        "anthropic_messages", {**MESSAGES, "output_limit_default": 4096}),
    "claude-3-5-sonnet on anthropic": ("anthropic", "claude-3-5-sonnet-latest", ANTHROPIC,
        "anthropic_messages", MESSAGES),
    "claude on a cloud's anthropic endpoint": ("custom", "us.anthropic.claude-opus-4-1-v1:0",
        "https://gateway.example.com/anthropic", "anthropic_messages", {
        **MESSAGES, "output_limit_default": 16384, **CUSTOM}),
    "another model on an anthropic-compatible endpoint": ("custom", "glm-4.6",
        "https://gateway.example.com/anthropic", "anthropic_messages", {
        **MESSAGES, **CUSTOM}),
    "claude-sonnet-4 on openrouter": ("openrouter", "anthropic/claude-sonnet-4", OPENROUTER,
        "chat_completions", {"cache_markers": True, "output_limit_default": 16384}),
    "o3 on openrouter reads max_tokens": ("openrouter", "openai/o3", OPENROUTER,
        "chat_completions", REASONING),
    "deepseek-reasoner": ("deepseek", "deepseek-reasoner", "https://api.deepseek.com",
        "chat_completions", {"supports_temperature": False}),
    "deepseek-chat": ("deepseek", "deepseek-chat", "https://api.deepseek.com",
        "chat_completions", {}),
    "qwen on ollama": ("ollama", "qwen3:8b", "http://127.0.0.1:11434/v1", "chat_completions",
        LOCAL),
    "qwen on llama.cpp": ("llamacpp", "qwen2.5-coder-7b-instruct", "http://127.0.0.1:8080/v1",
        "chat_completions", LOCAL),
    "qwen on vllm": ("vllm", "Qwen/Qwen3-8B", "http://127.0.0.1:8000/v1", "chat_completions",
        LOCAL),
    "qwen on a custom server": ("custom", "qwen3-coder", "http://10.0.0.5:8000/v1",
        "chat_completions", CUSTOM),
    "gpt-4.1 on azure": ("custom", "gpt-4.1", AZURE, "chat_completions", {
        "output_limit_field": "max_completion_tokens", **CUSTOM}),
    "o4-mini on azure by provider name": ("azure", "o4-mini", "https://proxy.example.com/v1",
        "chat_completions", {"output_limit_field": "max_completion_tokens", **REASONING}),
    "gpt-5 on a local server keeps max_tokens": ("custom", "gpt-5", "http://127.0.0.1:8000/v1",
        "chat_completions", {**REASONING, **CUSTOM}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_the_table_resolves_the_profile_of_real_model_endpoint_pairs(case: str) -> None:
    provider, model, base_url, api_mode, facts = CASES[case]
    profile = profile_for(provider=provider, model=model, base_url=base_url, api_mode=api_mode)
    assert profile == ModelProfile(**facts)


def test_a_profile_is_resolved_once_and_shared() -> None:
    first = profile_for(provider="openai", model="o3", base_url=OPENAI)
    assert profile_for(provider="OpenAI", model="o3", base_url=OPENAI + "/") is first


# Through the wire: each fact changes what the endpoint receives.

USER = [{"role": "user", "content": "hi"}]


async def sent_by_model(
    provider: ScriptedProvider, make_client: Any, request: ModelRequest
) -> dict[str, dict[str, Any]]:
    """The body a client of o3 and one of gpt-4.1 sent for ``request``."""
    bodies = {}
    for model in ("o3", "gpt-4.1"):
        provider.add(text("ok"))
        client = make_client(model)
        try:
            assert (await client.complete(request, NullStream())).text == "ok"
        finally:
            await client.aclose()
        bodies[model] = provider.requests[-1].body
    assert provider.invalid_requests == []
    return bodies


async def test_o3_on_openai_gets_max_completion_tokens_and_no_temperature(
    provider: ScriptedProvider,
) -> None:
    """The profile OpenAI's endpoint resolves, on a client that talks to the scripted one."""

    def on_openai(model: str) -> ChatCompletionsClient:
        profile = profile_for(provider="openai", model=model, base_url=OPENAI)
        return ChatCompletionsClient(
            model, base_url=provider.openai_base_url, api_key="k", profile=profile
        )

    request = ModelRequest(messages=USER, max_tokens=500, temperature=0.2)
    bodies = await sent_by_model(provider, on_openai, request)
    assert bodies["o3"]["max_completion_tokens"] == 500
    assert "max_tokens" not in bodies["o3"] and "temperature" not in bodies["o3"]
    assert (bodies["gpt-4.1"]["max_completion_tokens"], bodies["gpt-4.1"]["temperature"]) == (
        500,
        0.2,
    )


async def test_responses_asks_reasoning_models_for_encrypted_reasoning_only(
    provider: ScriptedProvider,
) -> None:
    def responses(model: str) -> ResponsesClient:
        return ResponsesClient(model, base_url=provider.openai_base_url, api_key="k")

    request = ModelRequest(messages=USER, max_tokens=300, temperature=0.5)
    bodies = await sent_by_model(provider, responses, request)
    assert bodies["o3"]["include"] == ["reasoning.encrypted_content"]
    assert "temperature" not in bodies["o3"] and bodies["o3"]["max_output_tokens"] == 300
    assert "include" not in bodies["gpt-4.1"] and bodies["gpt-4.1"]["temperature"] == 0.5


def bodies_of(server: ScriptedProvider) -> list[dict[str, Any]]:
    assert server.invalid_requests == []
    return [request.body for request in server.requests]


def markers(body: dict[str, Any]) -> int:
    """How many messages (or system blocks) carry a cache_control breakpoint."""
    parts = [*(body.get("system") or [])]
    for message in body.get("messages") or []:
        content = message.get("content")
        parts.extend(content if isinstance(content, list) else [])
    return sum(1 for part in parts if isinstance(part, dict) and "cache_control" in part)


@pytest.mark.parametrize(
    ("provider_name", "model", "mode", "marked"),
    [
        ("openrouter", "anthropic/claude-sonnet-4", "chat_completions", True),
        ("openrouter", "openai/gpt-4.1", "chat_completions", False),
        ("ollama", "qwen3:8b", "chat_completions", False),
        ("custom", "glm-4.6", "anthropic_messages", True),
        ("openai", "gpt-5", "codex_responses", False),
    ],
)
def test_cache_control_goes_only_where_the_profile_places_markers(
    tmp_path: Path, provider_name: str, model: str, mode: str, marked: bool
) -> None:
    with ScriptedProvider([text("one"), text("two")]) as server:
        with scripted_agent(server, tmp_path, mode, model=model, provider=provider_name) as agent:
            agent.chat("first")
            agent.chat("second")
        counts = [markers(body) for body in bodies_of(server)]
    assert (counts[0] > 0 and counts[1] > counts[0]) if marked else counts == [0, 0]


@pytest.mark.parametrize(
    ("model", "sent"),
    [
        ("claude-3-haiku-20240307", 4096),
        ("claude-sonnet-4-5", 16384),
        ("anthropic/claude-3-5-haiku-latest", 8192),
        ("glm-4.6", 8192),
    ],
)
def test_anthropic_gets_the_output_limit_of_the_model(
    tmp_path: Path, model: str, sent: int
) -> None:
    with ScriptedProvider([text("hi")]) as server:
        with scripted_agent(server, tmp_path, "anthropic_messages", model=model) as agent:
            agent.chat("hello")
        (body,) = bodies_of(server)
    assert body["max_tokens"] == sent


WRITTEN_CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 40}}\n</tool_call>'


@pytest.mark.parametrize(
    ("provider_name", "parsed"),
    [("ollama", True), ("llamacpp", True), ("vllm", True), ("lmstudio", True),
     ("openrouter", False), ("anthropic", False)],
)  # fmt: skip
def test_tool_calls_written_as_text_are_read_on_local_servers_only(
    tmp_path: Path, provider_name: str, parsed: bool
) -> None:
    with ScriptedProvider([text(WRITTEN_CALL), text("the sum is 42")]) as server:
        with scripted_agent(server, tmp_path, model="qwen3:8b", provider=provider_name) as agent:
            result = agent.run_conversation("What is 2 + 40?")
        assert server.invalid_requests == []
    assert tool_results(result) == (["42"] if parsed else [])
    assert result["final_response"] == ("the sum is 42" if parsed else WRITTEN_CALL)


def test_a_local_model_costs_nothing_and_a_hosted_one_is_priced() -> None:
    million = Usage(input_tokens=1_000_000)
    assert estimate_cost("qwen3:8b", million, "ollama") == 0.0
    assert estimate_cost("gpt-4.1", million, "openai") == pytest.approx(2.0)
    free = profile_for(provider="custom", model="gpt-4.1", overrides={"billed": False})
    assert estimate_cost("gpt-4.1", million, "custom", free) == 0.0


# The user's overrides: a `profiles:` section keyed by model id or pattern.


def test_overrides_change_the_request_for_the_models_they_name(tmp_path: Path) -> None:
    profiles = {
        "scripted-*": {"supports_tool_choice": False, "stream_usage": False},
        "other": {"output_limit_field": "max_completion_tokens"},
    }
    config = {"profiles": profiles, "model.max_tokens": 64, "agent.max_turns": 1}
    with ScriptedProvider([call("add", {"a": 1, "b": 2}), text("stopped at 3")]) as server:
        with scripted_agent(server, tmp_path, config=config) as agent:
            result = agent.run_conversation("add 1 and 2")
        first, summary = bodies_of(server)
    assert tool_results(result) == ["3"]
    assert first["tools"] and "tool_choice" not in first and "stream_options" not in first
    assert first["max_tokens"] == 64 and "max_completion_tokens" not in first
    assert "tools" not in summary and "tool_choice" not in summary, "no tools when none may run"


def test_overrides_turn_text_tool_calls_on_for_a_hosted_endpoint(tmp_path: Path) -> None:
    config = {"profiles": {"openai/gpt-oss*": {"text_tool_calls": True}}}
    with ScriptedProvider([text(WRITTEN_CALL), text("the sum is 42")]) as server:
        agent = scripted_agent(
            server, tmp_path, model="openai/gpt-oss-120b", provider="openrouter", config=config
        )
        with agent:
            result = agent.run_conversation("What is 2 + 40?")
        assert server.invalid_requests == []
    assert tool_results(result) == ["42"]


def test_one_call_at_a_time_on_the_anthropic_wire(tmp_path: Path) -> None:
    config = {"profiles": {"claude-*": {"parallel_tool_calls": False}}}
    with ScriptedProvider([text("hi")]) as server:
        with scripted_agent(
            server, tmp_path, "anthropic_messages", model="claude-sonnet-4-5", config=config
        ) as agent:
            agent.chat("hello")
        (body,) = bodies_of(server)
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


@pytest.mark.parametrize(
    ("facts", "named"),
    [
        (
            {"supports_tool_choise": False},
            "gpt-4.1.supports_tool_choise: unknown profile fact (did you mean supports_tool_ch",
        ),
        (
            {"output_limit_field": "max_toks"},
            "gpt-4.1.output_limit_field: found 'max_toks', expected max_tokens | max_completion",
        ),
        ({"cache_markers": "yes"}, "gpt-4.1.cache_markers: found 'yes', expected true or false"),
        (["cache_markers"], "gpt-4.1: found ['cache_markers'], expected a mapping"),
    ],
)
def test_a_bad_override_is_one_error_naming_the_key(tmp_path: Path, facts: Any, named: str) -> None:
    profiles = {"claude*": {"stream_usage": False}, "gpt-4.1": facts}
    with pytest.raises(ConfigError) as caught:
        Agent(model="o3", api_key="k", home=tmp_path, config={"profiles": profiles})
    assert f"profiles.{named}" in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(ProviderError, match=r"config: profile[.:]"):
        profile_for(provider="openai", model="gpt-4.1", overrides=facts)


def test_the_cli_reads_profiles_from_the_config_file_and_refuses_a_typo(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    env = {**os.environ, "TALARIA_HOME": str(tmp_path)}
    env.pop("TALARIA_MODEL", None)
    with ScriptedProvider([text("fine")]) as server:
        args = [TALARIA, "-p", "hi", "-m", "scripted-model", "--base-url", server.openai_base_url]
        config.write_text(yaml.safe_dump({"profiles": {"scripted-model": {"stream_usag": False}}}))
        refused = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
        assert server.requests == []
        config.write_text(yaml.safe_dump({"profiles": {"scripted-model": {"stream_usage": False}}}))
        done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
        (body,) = bodies_of(server)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1
    assert f"{config}: profiles.scripted-model.stream_usag: unknown profile fact" in refused.stderr
    assert (done.returncode, done.stdout) == (0, "fine\n")
    assert body["stream"] is True and "stream_options" not in body


def test_doctor_shows_the_profile_in_force(tmp_path: Path) -> None:
    env = {**os.environ, "TALARIA_HOME": str(tmp_path)}
    env.pop("TALARIA_MODEL", None)
    with ScriptedProvider() as server:
        model = {
            "default": "anthropic/claude-sonnet-4",
            "provider": "openrouter",
            "base_url": server.openai_base_url,
            "api_key": "sk-or-test",
        }
        config = {"model": model, "profiles": {"*claude*": {"stream_usage": False}}}
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        done = subprocess.run(
            [TALARIA, "doctor"], capture_output=True, text=True, env=env, timeout=60
        )
    line = next(line for line in done.stdout.splitlines() if line.split()[:1] == ["profile"])
    assert "output_limit_default=16384 · stream_usage=false · cache_markers=true" in line


def test_overrides_follow_the_model_to_its_fallback(tmp_path: Path) -> None:
    """Keyed by model, an override holds wherever that model runs, not for the primary only."""
    config = {
        "profiles": {"backup-*": {"stream_usage": False}},
        "retry.max_attempts": 1,
        "retry.base_delay": 0.01,
    }
    with ScriptedProvider([Fail(500)]) as primary, ScriptedProvider([text("backup")]) as backup:
        fallback = {"model": "backup-model", "base_url": backup.openai_base_url, "api_key": "k"}
        with scripted_agent(
            primary, tmp_path, config=config, fallback_providers=[fallback]
        ) as agent:
            result = agent.run_conversation("hi")
        (first,), (second,) = bodies_of(primary), bodies_of(backup)
    assert result["final_response"] == "backup"
    assert first["stream_options"] == {"include_usage": True}
    assert "stream_options" not in second
