"""Secrets stay out of the conversation: reading them asks, and what is read is redacted
before it reaches the provider, the store or an error message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import tool_results
from talaria import Agent
from talaria.messages.redact import redact
from talaria.testing import Fail, ScriptedProvider, calls, text
from talaria.tools.builtin import files

OWN_KEY = "zq-own-key-7f3a9c2e41b8d6"
"""The agent's own key, in no known shape: it must be redacted by value."""
PROJECT_KEY = "sk-ant-api03-Q7mX2pL9vR4tY8wZ1nB6cD3fG5hJ0kS"
DB_PASSWORD = "correct-horse-battery-staple"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    home, work = tmp_path / "talaria", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.yaml").write_text(f"model:\n  api_key: {OWN_KEY}\n")
    (work / ".env").write_text(f"ANTHROPIC_API_KEY={PROJECT_KEY}\nDB_PASSWORD={DB_PASSWORD}\n")
    return {"home": home, "work": work}


def _agent(server: ScriptedProvider, dirs: dict[str, Path], **kwargs: Any) -> Agent:
    return Agent(
        model="scripted-model",
        base_url=server.openai_base_url,
        home=dirs["home"],
        cwd=dirs["work"],
        toolsets=["terminal", "file"],
        config={"context.engine": "none", "sandbox.mode": "full-access"},
        **kwargs,
    )


def _leaks(blob: str) -> list[str]:
    return [secret for secret in (OWN_KEY, PROJECT_KEY, DB_PASSWORD) if secret in blob]


def test_reading_secrets_asks_and_what_is_read_never_reaches_the_model_or_the_store(
    provider: ScriptedProvider, setup: dict[str, Path]
) -> None:
    asked: list[Any] = []
    provider.add(
        calls(("read_file", {"path": str(setup["home"] / "config.yaml")})),
        calls(("terminal", {"command": "cat .env"})),
        text("done"),
    )
    agent = _agent(provider, setup, approval_callback=lambda r: asked.append(r) or "once")
    with agent:
        result = agent.run_conversation(user_message="show me the settings")
        stored = agent.store.load_messages(result["session_id"])

    config_result, env_result = tool_results(result)
    assert [request.reason.split(" (")[0] for request in asked] == [
        "reads talaria's own settings and API keys",
        "reads an environment file that usually holds keys",
    ]
    assert "[REDACTED:configured-key]" in config_result
    assert (
        "[REDACTED:anthropic-key]" in env_result and "DB_PASSWORD=[REDACTED:secret]" in env_result
    )
    sent = json.dumps([request.body for request in provider.requests])
    assert _leaks(sent) == []
    assert _leaks(json.dumps(stored)) == []
    assert _leaks(json.dumps(result["messages"])) == []


def test_without_an_approver_secrets_are_not_read(
    provider: ScriptedProvider, setup: dict[str, Path]
) -> None:
    provider.add(
        calls(("read_file", {"path": ".env"}), ("terminal", {"command": "grep KEY .env"})),
        text("done"),
    )
    with _agent(provider, setup) as agent:
        results = tool_results(agent.run_conversation(user_message="read it"))
    assert all(result.startswith("Denied") for result in results)
    assert _leaks(json.dumps(results)) == []


@pytest.mark.parametrize("ripgrep", [True, False])
def test_searching_the_project_never_shows_secret_files(
    provider: ScriptedProvider,
    setup: dict[str, Path],
    ripgrep: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (setup["work"] / "prod.env").write_text(f"DB_PASSWORD={DB_PASSWORD}\n")
    (setup["work"] / "notes.md").write_text("DB_PASSWORD is in the vault\n")
    if not ripgrep:
        monkeypatch.setattr(files, "ripgrep", lambda: None)  # the Python fallback
    provider.add(
        calls(("search_files", {"pattern": "DB_PASSWORD"})),
        calls(("search_files", {"pattern": "DB_PASSWORD", "path": ".env"})),
        text("done"),
    )
    with _agent(provider, setup) as agent:
        listing, direct = tool_results(agent.run_conversation(user_message="find it"))
    assert "notes.md" in listing and ".env" not in listing
    assert direct.startswith("Denied")
    assert _leaks(listing + direct) == []


def test_a_provider_error_that_echoes_the_key_is_redacted(
    provider: ScriptedProvider, setup: dict[str, Path]
) -> None:
    provider.add(Fail(401, f"Incorrect API key provided: {OWN_KEY}"))
    with _agent(provider, setup) as agent:
        result = agent.run_conversation(user_message="hello")
        stored = agent.store.load_messages(result["session_id"])
    assert result["failed"] and "Incorrect API key provided" in result["error"]
    assert "[REDACTED:configured-key]" in result["error"]
    assert _leaks(json.dumps(result, default=str)) == [] and _leaks(json.dumps(stored)) == []


@pytest.mark.parametrize(
    ("secret", "marker"),
    [
        ("sk-proj-4fJ8sK2mQ9xL1pZ7vB3nC6tY0wR5", "[REDACTED:openai-key]"),
        ("sk-or-v1-9f8e7d6c5b4a39281706f5e4", "[REDACTED:openrouter-key]"),
        (
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc.def",
            "Authorization: Bearer [REDACTED:bearer-token]",
        ),
        ("AKIAIOSFODNN7EXAMPLE", "[REDACTED:aws-access-key]"),
        ("ghp_1234567890abcdefghijklmnopqrstuvwxyz", "[REDACTED:github-token]"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
            "[REDACTED:private-key]",
        ),
    ],
)
def test_known_secret_shapes_are_redacted(secret: str, marker: str) -> None:
    assert redact(f"before {secret} after") == f"before {marker} after"


@pytest.mark.parametrize(
    "harmless",
    ["max_tokens: 4096", "tokenizer = whitespace", "skip the sk- prefix", "password: ", "a" * 40],
)
def test_ordinary_text_is_left_alone(harmless: str) -> None:
    assert redact(harmless) == harmless
