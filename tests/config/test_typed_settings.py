"""Settings read as attributes of frozen sections, with the schema's defaults, and the old
name of the iteration budget still working."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from helpers import scripted_agent
from talaria.config import Config
from talaria.config_schema import SCHEMA
from talaria.testing import calls, text
from talaria.testing.server import ScriptedProvider


def test_sections_answer_every_schema_key_with_its_default(tmp_path: Path) -> None:
    config = Config.load(tmp_path, env={})
    for key, rule in SCHEMA.items():
        node = config
        for part in key.split("."):
            node = getattr(node, part)
        assert node == rule.default, key


def test_a_section_is_read_only_and_names_a_misspelt_key(tmp_path: Path) -> None:
    config = Config.load(tmp_path, overrides={"compression.threshold": 0.7}, env={})
    assert config.compression.threshold == 0.7
    with pytest.raises(AttributeError, match="read-only"):
        config.compression.threshold = 0.9
    with pytest.raises(AttributeError, match=r"did you mean agent\.max_iterations"):
        _ = config.agent.max_iteration


def test_max_turns_in_the_file_still_sets_the_budget_with_one_notice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "config.yaml").write_text("agent:\n  max_turns: 7\n")
    with caplog.at_level(logging.WARNING, logger="talaria.config"):
        first = Config.load(tmp_path, env={})
        second = Config.load(tmp_path, env={})
    assert first.agent.max_iterations == second.agent.max_iterations == 7
    assert first.get("agent.max_turns") == 7
    notices = [r.message for r in caplog.records if "max_turns" in r.message]
    assert len(notices) == 1 and "agent.max_iterations" in notices[0]


def test_the_new_key_wins_over_the_old_one_in_the_same_file(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("agent:\n  max_turns: 7\n  max_iterations: 4\n")
    assert Config.load(tmp_path, env={}).agent.max_iterations == 4


def test_the_old_key_limits_the_model_calls_of_a_turn(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(*[calls(("add", {"a": i, "b": 1})) for i in range(2)], text("summary"))
    with scripted_agent(provider, tmp_path, config={"agent.max_turns": 2}) as agent:
        assert agent.max_iterations == 2
        result = agent.run_conversation(user_message="loop")
    assert result["turn_exit_reason"] == "max_iterations_reached"
    assert result["api_calls"] == 3  # two steps, then the tool-free summary
