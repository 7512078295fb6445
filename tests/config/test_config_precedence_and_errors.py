"""Broken configuration and failing storage: clear errors, nothing lost."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import scripted_agent
from talaria import Agent
from talaria.config import Config, ConfigError
from talaria.config_write import set_config_value
from talaria.store.base import StoreError
from talaria.store.sqlite import SQLiteSessionStore
from talaria.testing import ScriptedProvider, text


def test_precedence_arguments_file_environment_defaults(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("model:\n  default: from-file\nagent:\n  max_turns: 7\n")
    env = {"TALARIA_MODEL": "from-env", "TALARIA_PROVIDER": "openrouter"}
    config = Config.load(tmp_path, overrides={"agent.max_turns": 3}, env=env)
    assert config.get("model.default") == "from-file"
    assert config.get("model.provider") == "openrouter"
    assert config.get("agent.max_turns") == 3
    assert config.get("compression.threshold") == 0.5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model: [unclosed\n", "not valid YAML"),
        ("- just\n- a list\n", "expected a mapping"),
        ("agent:\n  max_turns: lots\n", 'agent.max_turns: found "lots", expected a whole number'),
        ("compression:\n  threshold: 7\n", "compression.threshold"),
        ("approvals:\n  mode: sometimes\n", "approvals.mode"),
    ],
)
def test_broken_config_is_a_clear_error_naming_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    (tmp_path / "config.yaml").write_text(text)
    with pytest.raises(ConfigError, match=message) as caught:
        Agent(model="m", home=tmp_path)
    assert str(tmp_path / "config.yaml") in str(caught.value)


def test_cli_reports_a_broken_config_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("agent: {max_turns: lots}\n")
    done = subprocess.run(
        [sys.executable, "-m", "talaria.cli.main", "chat", "-q", "hi", "--model", "m"],
        env={"TALARIA_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1
    assert "max_turns" in done.stderr


def test_set_config_value_keeps_the_rest_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("model:\n  default: keep-me\n")
    set_config_value(path, "compression.protect_last_n", 12)
    config = Config.load(tmp_path)
    assert config.get("model.default") == "keep-me"
    assert config.get("compression.protect_last_n") == 12


class FlakyStore(SQLiteSessionStore):
    """A real store whose appends fail while `broken` is set (a full disk, a locked file)."""

    broken = False

    def append_messages(
        self,
        session_id: str,
        items: list[tuple[int, dict[str, Any]]],
        *,
        writer: str | None = None,
    ) -> None:
        if self.broken:
            raise StoreError("database or disk is full")
        super().append_messages(session_id, items, writer=writer)


def test_a_failing_store_fails_the_turn_cleanly_and_loses_nothing(tmp_path: Path) -> None:
    store = FlakyStore(tmp_path / "state.db")
    server = ScriptedProvider([text("first"), text("second")])
    with server, scripted_agent(server, tmp_path, store=store) as agent:
        agent.run_conversation(user_message="one")
        store.broken = True
        failed = agent.run_conversation(user_message="two")
        store.broken = False
        recovered = agent.run_conversation(user_message="three")
        stored = store.load_messages(agent.session_id or "")
    assert failed["failed"] and failed["turn_exit_reason"] == "failed:store"
    assert "disk is full" in failed["error"]
    assert recovered["final_response"] == "second"
    assert [m["content"] for m in stored] == ["one", "first", "two", "three", "second"]
    assert "two" in str(server.requests[-1].body["messages"]), "the unsaved message was sent"
    assert server.invalid_requests == []


def test_an_explicit_budget_wins_and_must_be_positive(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("agent:\n  max_turns: 12\n")
    assert Agent(model="m", home=tmp_path).max_iterations == 12
    assert Agent(model="m", home=tmp_path, max_iterations=3).max_iterations == 3
    with pytest.raises(ValueError, match="at least 1"):
        Agent(model="m", home=tmp_path, max_iterations=0)


def test_model_options_reach_the_client_and_unknown_ones_are_named(tmp_path: Path) -> None:
    options = {"extra_body": {"reasoning_effort": "low"}, "default_headers": {"X-Title": "t"}}
    with ScriptedProvider([text("fine")]) as server:
        with scripted_agent(server, tmp_path, config={"model.options": options}) as agent:
            assert agent.chat("hi") == "fine"
        with scripted_agent(server, tmp_path, config={"model.options": {"thinkin": 1}}) as agent:
            result = agent.run_conversation(user_message="hi")
    (request,) = server.requests
    assert request.body["reasoning_effort"] == "low"
    assert request.headers.get("x-title") == "t"
    assert result["turn_exit_reason"] == "failed:config"
    assert "thinkin" in result["error"] and "extra_body" in result["error"]
