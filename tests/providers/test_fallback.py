"""Fallback providers and credential refresh, end to end through the real SDKs; plus what a
user of `talaria chat -q` sees when every provider fails."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from helpers import MODES, base_url, scripted_agent
from talaria import Agent
from talaria.context.engine import ContextEngine
from talaria.providers.factory import ProviderSpec
from talaria.providers.resilience.credentials import CredentialSource
from talaria.testing.script import Fail, Reply, ScriptedCall, text
from talaria.testing.server import ScriptedProvider

FAST = {"context.engine": "none", "retry.base_delay": 0.01, "retry.max_delay": 1.0}
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "CUSTOM_API_KEY")


@pytest.fixture(autouse=True)
def no_keys_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def backup() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(model="backup-model") as server:
        yield server


def agent_for(
    server: ScriptedProvider, home: Path, mode: str = "chat_completions", **kwargs: Any
) -> Agent:
    config = {**FAST, **kwargs.pop("config", {})}
    return scripted_agent(server, home, mode, api_key="old-key", config=config, **kwargs)


def keys_sent(server: ScriptedProvider) -> list[str]:
    return [
        r.headers.get("authorization") or r.headers.get("x-api-key") or "" for r in server.requests
    ]


# ---- where a fresh key comes from ------------------------------------------------------

SPEC = ProviderSpec("custom", "m", "https://llm.example/v1", "old-key", "chat_completions")


def test_key_sources_are_tried_in_order_and_the_old_key_does_not_count() -> None:
    source = CredentialSource(
        refresh=lambda: "old-key",
        command="printf 'from-command\\nsecond line'",
        read_config=lambda: "from-config",
        env=lambda: {"OPENAI_API_KEY": "from-env"},
    )
    assert source.fresh_key(SPEC) == "from-command"
    from_env = CredentialSource(read_config=lambda: None, env=lambda: {"OPENAI_API_KEY": "e"})
    assert from_env.fresh_key(SPEC) == "e"
    assert CredentialSource(env=lambda: {}).fresh_key(SPEC) is None


def test_a_broken_source_is_skipped() -> None:
    def broken() -> str:
        raise RuntimeError("vault unreachable")

    source = CredentialSource(
        refresh=broken, command="exit 3", env=lambda: {"OPENAI_API_KEY": "k2"}
    )
    assert source.fresh_key(SPEC) == "k2"


def test_a_keyless_local_server_gets_no_placeholder_as_a_fresh_key() -> None:
    local = ProviderSpec("custom", "m", "http://127.0.0.1:9/v1", "old-key", "chat_completions")
    assert CredentialSource(env=lambda: {}).fresh_key(local) is None


# ---- refresh and fallback through the agent --------------------------------------------


def test_key_refreshed_from_a_command(provider: ScriptedProvider, tmp_path: Path) -> None:
    provider.add(Fail(401), text("ok"))
    with agent_for(provider, tmp_path, config={"model.api_key_command": "echo cmd-key"}) as agent:
        result = agent.run_conversation(user_message="hi")
    assert result["final_response"] == "ok"
    assert keys_sent(provider) == ["Bearer old-key", "Bearer cmd-key"]


def test_key_refreshed_from_the_environment(
    provider: ScriptedProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider.add(Fail(403), text("ok"))
    with agent_for(provider, tmp_path) as agent:
        monkeypatch.setenv("OPENAI_API_KEY", "rotated-key")
        result = agent.run_conversation(user_message="hi")
    assert result["final_response"] == "ok"
    assert keys_sent(provider)[-1] == "Bearer rotated-key"


def test_key_refreshed_from_an_edited_config_file(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(Fail(401), text("ok"))
    with agent_for(provider, tmp_path) as agent:
        (tmp_path / "config.yaml").write_text(yaml.safe_dump({"model": {"api_key": "edited"}}))
        result = agent.run_conversation(user_message="hi")
    assert result["final_response"] == "ok"
    assert keys_sent(provider)[-1] == "Bearer edited"


def test_refresh_happens_at_most_once_per_turn(provider: ScriptedProvider, tmp_path: Path) -> None:
    counter = iter(range(100))
    provider.add(Fail(401), Fail(401), Fail(401), text("second turn"))
    config = {"model.api_key_refresh": lambda: f"key-{next(counter)}"}
    with agent_for(provider, tmp_path, config=config) as agent:
        first = agent.run_conversation(user_message="hi")
        second = agent.run_conversation(user_message="again")
    assert first["turn_exit_reason"] == "failed:auth"
    assert "401" in first["error"]
    assert keys_sent(provider)[:2] == ["Bearer old-key", "Bearer key-0"]
    assert second["final_response"] == "second turn", "a new turn may refresh again"


def test_a_fallback_refreshes_its_own_key(
    provider: ScriptedProvider, backup: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(Fail(500), Fail(500), Fail(500))
    backup.add(Fail(401), text("backup answered"))
    fallback = {
        "model": "backup-model",
        "base_url": backup.openai_base_url,
        "api_key": "stale",
        "api_key_command": "echo backup-fresh",
    }
    with agent_for(provider, tmp_path, fallback_providers=[fallback]) as agent:
        result = agent.run_conversation(user_message="hi")
    assert result["final_response"] == "backup answered"
    assert result["model"] == "backup-model"
    assert keys_sent(backup) == ["Bearer stale", "Bearer backup-fresh"]


def test_fallbacks_from_the_config_file_in_order(
    provider: ScriptedProvider, backup: ScriptedProvider, tmp_path: Path
) -> None:
    with ScriptedProvider() as second:
        (tmp_path / "config.yaml").write_text(
            yaml.safe_dump(
                {
                    "fallback_providers": [
                        {
                            "model": "backup-model",
                            "base_url": backup.openai_base_url,
                            "api_key": "k",
                        },
                        {
                            "model": "second-model",
                            "base_url": second.openai_base_url,
                            "api_key": "k",
                        },
                    ]
                }
            )
        )
        provider.add(Fail(529), Fail(529), Fail(529))
        backup.add(Fail(503), Fail(503), Fail(503))
        second.add(text("third time lucky"))
        with agent_for(provider, tmp_path) as agent:
            result = agent.run_conversation(user_message="hi")
        assert result["final_response"] == "third time lucky"
        assert result["model"] == "second-model"
        assert (len(provider.requests), len(backup.requests), len(second.requests)) == (3, 3, 1)


def test_each_turn_starts_on_the_primary(
    provider: ScriptedProvider, backup: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(Fail(500), Fail(500), Fail(500), text("primary is back"))
    backup.add(text("backup answered"))
    fallback = {"model": "backup-model", "base_url": backup.openai_base_url, "api_key": "k"}
    with agent_for(provider, tmp_path, fallback_providers=[fallback]) as agent:
        first = agent.run_conversation(user_message="one")
        second = agent.run_conversation(user_message="two")
    assert (first["model"], second["model"]) == ("backup-model", "scripted-model")
    assert second["final_response"] == "primary is back"
    assert provider.invalid_requests == [] and backup.invalid_requests == []


@pytest.mark.parametrize(
    ("primary_mode", "fallback_mode"), [(a, b) for a in MODES for b in MODES if a != b]
)
def test_falling_back_to_another_api_mode_sends_a_valid_history(
    provider: ScriptedProvider, tmp_path: Path, primary_mode: str, fallback_mode: str
) -> None:
    thinking = Reply(
        reasoning="I should add these.", tool_calls=[ScriptedCall("add", {"a": 2, "b": 3})]
    )
    provider.add(thinking, Fail(500), Fail(500), Fail(500), text("five"))
    fallback = {
        "model": "other-model",
        "base_url": base_url(provider, fallback_mode),
        "api_key": "k",
        "api_mode": fallback_mode,
    }
    with agent_for(provider, tmp_path, primary_mode, fallback_providers=[fallback]) as agent:
        result = agent.run_conversation(user_message="2+3?")
    assert result["final_response"] == "five"
    assert result["api_mode"] == fallback_mode
    assert provider.invalid_requests == [], "the wire rejects foreign replay state"
    last = provider.requests[-1]
    assert last.api_mode == fallback_mode
    assert "add" in str(last.body) and "5" in str(last.body), "the tool round trip carried over"


# ---- context overflow -------------------------------------------------------------------


class ForgetfulEngine(ContextEngine):
    """Compresses by keeping only the newest message; counts how often it was asked. Written
    for the old contract (the whole runtime and session), which still runs, deprecated."""

    compressions: ClassVar[list[int]] = []

    def __init__(self, config: Any, runtime: Any) -> None:
        pass

    async def before_request(self, rt: Any, session: Any, state: Any) -> None:
        pass

    def record_usage(self, usage: Any, message_count: int) -> None:
        pass

    async def compress(self, rt: Any, session: Any, state: Any, focus: str | None = None) -> bool:
        ForgetfulEngine.compressions.append(len(session.history))
        session.history[:] = session.history[-1:]
        return True


OVERFLOW = Fail(400, message="This model's maximum context length is 10 tokens")


def test_context_overflow_compresses_once_and_retries(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    ForgetfulEngine.compressions.clear()
    provider.add(OVERFLOW, text("fits now"))
    history = [{"role": "user", "content": "old"}, {"role": "assistant", "content": "answer"}]
    engine = {"context.engine": f"{__name__}:ForgetfulEngine"}
    with (
        pytest.warns(DeprecationWarning, match=r"before_request\(rt, session, state\)"),
        agent_for(provider, tmp_path, config=engine) as agent,
    ):
        result = agent.run_conversation(user_message="new", conversation_history=history)
    assert result["final_response"] == "fits now"
    assert ForgetfulEngine.compressions == [3]
    assert len(provider.requests) == 2


def test_context_overflow_without_an_engine_fails_with_the_cause(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(OVERFLOW)
    with agent_for(provider, tmp_path) as agent:
        result = agent.run_conversation(user_message="hi")
    assert result["turn_exit_reason"] == "failed:context_overflow"
    assert "maximum context length" in result["error"]


# ---- the CLI ------------------------------------------------------------------------------


def run_cli(
    server: ScriptedProvider, home: Path, config: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARS and not k.startswith("TALARIA")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "talaria.cli.main",
            "chat",
            "-q",
            "hi",
            "--toolsets",
            "",
            "--base-url",
            server.openai_base_url,
            "--api-key",
            "k",
            "--model",
            "m",
            "--home",
            str(home),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_cli_exits_2_with_one_line_when_every_provider_fails(
    provider: ScriptedProvider, backup: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(Fail(500), Fail(500), Fail(500))
    backup.add(Fail(429), Fail(429), Fail(429))
    config = {
        "retry": {"base_delay": 0.01},
        "fallback_providers": [
            {"model": "backup-model", "api_key": "k", "base_url": backup.openai_base_url}
        ],
    }
    done = run_cli(provider, tmp_path / "home", config)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("talaria: ")
    assert "every provider failed" in lines[0] and "backup-model" in lines[0]


def test_cli_exits_0_after_a_retry(provider: ScriptedProvider, tmp_path: Path) -> None:
    provider.add(Fail(503), text("fine after all"))
    done = run_cli(provider, tmp_path / "home", {"retry": {"base_delay": 0.01}})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "fine after all"
