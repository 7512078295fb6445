"""Every bad configuration value is one line naming the file, the key, what was found and what
is expected; the CLI exits 2, `talaria config set` repairs the file, the next turn works."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cli_process import ask, cli, integrity, one_line, stored_contents
from helpers import scripted_agent, tool_results
from talaria import ConfigError
from talaria.agent import Agent
from talaria.cli.main import main
from talaria.config import Config
from talaria.config_schema import SCHEMA
from talaria.testing import ScriptedProvider, call, text

SEEN = [
    # (file text, the one-line message's tail, the repair: key and value)
    ("approvals:\n  timeout: []\n", "approvals.timeout: found [], expected a positive number"),
    ("command_allowlist: 5\n", "command_allowlist: found 5, expected a list of strings"),
    ("model:\n  options: 5\n", "model.options: found 5, expected a mapping"),
    ("fallback_providers: [5]\n", "fallback_providers[0]: found 5, expected a mapping"),
    ('agent:\n  tool_timeout: "x"\n', 'agent.tool_timeout: found "x", expected a positive number'),
    ("agent:\n  max_tool_workers: 0\n", "agent.max_tool_workers: found 0, expected a whole number"),
    (
        "agent:\n  max_tokens_per_turn: 1500.5\n",
        "agent.max_tokens_per_turn: found 1500.5, expected a whole number",
    ),
    (
        "model:\n  base_url: http://127.0.0.1:99999/v1\n",
        'model.base_url: found "http://127.0.0.1:99999/v1", expected an http(s) URL with a port',
    ),
]
REPAIRS = {
    "approvals.timeout": "30",
    "command_allowlist": "[]",
    "model.options": "{}",
    "fallback_providers": "[]",
    "agent.tool_timeout": "60",
    "agent.max_tool_workers": "4",
    "agent.max_tokens_per_turn": "100000",
    "model.base_url": None,  # set to the scripted server's URL
}


@pytest.mark.parametrize(("config", "message"), SEEN, ids=[m.split(":")[0] for _, m in SEEN])
def test_a_bad_value_is_one_line_exit_2_and_config_set_repairs_it(
    tmp_path: Path, config: str, message: str
) -> None:
    with ScriptedProvider([text("first"), text("second")]) as server:
        with scripted_agent(server, tmp_path) as agent:
            assert agent.chat("one") == "first"
        path = tmp_path / "config.yaml"
        path.write_text(config)

        broken = ask(tmp_path, server, "two", "--continue")
        line = one_line(broken.stderr)
        assert broken.returncode == 2
        assert broken.stdout == ""
        assert line.startswith(f"talaria: {path}: {message}")
        assert len(server.requests) == 1, "nothing was sent with the broken configuration"

        key = message.split(":")[0].split("[")[0]
        value = REPAIRS[key] or server.openai_base_url
        assert main(["config", "set", key, value, "--home", str(tmp_path)]) == 0
        with scripted_agent(server, tmp_path, session_id="latest") as agent:
            assert agent.chat("three") == "second"
    assert integrity(tmp_path / "state.db") == "ok"
    assert stored_contents(tmp_path / "state.db") == ["one", "first", "three", "second"]


def test_the_library_raises_the_same_one_line_config_error(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("agent:\n  max_tool_workers: 0\n")
    with pytest.raises(ConfigError) as caught:
        Agent(model="m", home=tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'config.yaml'}: agent.max_tool_workers: found 0, "
        "expected a whole number from 1 to 256"
    )
    with pytest.raises(ConfigError, match=r"config argument: agent\.tool_timeout: found -1"):
        Agent(model="m", home=tmp_path / "other", config={"agent.tool_timeout": -1})


def test_a_base_url_argument_with_a_bad_port_is_one_line_exit_2(tmp_path: Path) -> None:
    done = cli(
        tmp_path, "chat", "-q", "hi", "--model", "m", "--api-key", "k",
        "--base-url", "http://127.0.0.1:99999/v1",
    )  # fmt: skip
    assert done.returncode == 2
    assert "base_url: found" in one_line(done.stderr)
    assert "port from 1 to 65535" in done.stderr


def test_unknown_keys_warn_with_a_close_match_and_still_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "config.yaml").write_text("agent:\n  max_turn: 5\nfuture_feature: {on: true}\n")
    with caplog.at_level(logging.WARNING, logger="talaria.config"):
        config = Config.load(tmp_path)
    assert config.get("agent.max_turns") == 90
    warnings = [record.getMessage() for record in caplog.records]
    assert any("agent.max_turn " in w and "did you mean agent.max_turns?" in w for w in warnings)
    assert any("future_feature" in w for w in warnings)


def test_the_later_keys_of_the_design_are_registered(tmp_path: Path) -> None:
    for key in (
        "mcp_servers", "sandbox.mode", "sandbox.network", "model.total_timeout",
        "telemetry.enabled", "telemetry.capture_content", "agent.max_cost_usd", "store.url",
        "server.api_key",
    ):  # fmt: skip
        assert key in SCHEMA
    (tmp_path / "config.yaml").write_text("sandbox:\n  mode: open\n")
    with pytest.raises(ConfigError, match=r'sandbox\.mode: found "open", expected read-only'):
        Config.load(tmp_path)


def test_config_set_refuses_a_bad_value_and_keeps_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("model:\n  default: keep-me\n")
    done = cli(tmp_path, "config", "set", "agent.max_tool_workers", "0")
    assert done.returncode == 2
    assert "agent.max_tool_workers: found 0" in one_line(done.stderr)
    assert path.read_text() == "model:\n  default: keep-me\n"


def test_a_file_that_does_not_parse_says_where_and_how_to_repair_it(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("model:\n  default: [unclosed\n")
    for argv in (("config", "show"), ("config", "set", "model.default", "m"), ("chat", "-q", "x")):
        done = cli(tmp_path, *argv)
        line = one_line(done.stderr)
        assert done.returncode == 2, argv
        assert f"{path}: not valid YAML at line" in line
        assert "mv config.yaml config.yaml.bak" in line
    assert path.read_text() == "model:\n  default: [unclosed\n"


def test_approvals_off_as_the_docs_write_it_turns_approvals_off(tmp_path: Path) -> None:
    """`off` unquoted is a boolean to YAML 1.1; the documented `approvals.mode: off` must mean
    the word, whether written by hand or by `talaria config set`."""
    assert cli(tmp_path, "config", "set", "approvals.mode", "off").returncode == 0
    assert "mode: off" in (tmp_path / "config.yaml").read_text()
    (tmp_path / "config.yaml").write_text("approvals:\n  mode: off\n")
    victim = tmp_path / "victim"
    victim.mkdir()
    script = [call("terminal", {"command": "rm -r victim"}), text("removed")]
    with ScriptedProvider(script) as server:
        agent = scripted_agent(server, tmp_path, tools=[], toolsets=["terminal"])
        with agent:
            result = agent.run_conversation("remove it")
    assert tool_results(result) == ["(no output)\nexit code: 0"]
    assert result["final_response"] == "removed"
    assert Config.load(tmp_path).get("approvals.mode") == "off"
    assert not victim.exists()
