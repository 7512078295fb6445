"""Reading config.yaml goes through libyaml where PyYAML has it: the settings read are the
ones the pure-Python loader reads from the same file, YAML 1.1's words, aliases and all."""

from __future__ import annotations

from pathlib import Path

import yaml

from talaria.config import Config, read_config_file
from talaria.config_schema import as_meant

KEPT = """\
# a config as users write them
model: {provider: openrouter, name: "anthropic/claude-x", options: {temperature: 0.2}}
agent:
  max_iterations: 40
  tool_timeout: 150.0
approvals: {mode: off, timeout: 300}   # the word off, as the docs write it
command_allowlist: ["git status", 'ls -la', pytest]
x-args: &args [--verbose, "--root=é/ü"]
mcp_servers:
  one: {command: a, args: *args}
  two:
    command: b
    args: *args
    env: {TOKEN: "0123", EMPTY: ~, YES_WORD: yes}
context: {threshold: .5}
"""


def test_the_settings_read_are_those_the_pure_python_loader_reads(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(KEPT, encoding="utf-8")
    assert yaml.__with_libyaml__, "PyYAML without libyaml: the fast path is not tested"
    assert read_config_file(path) == as_meant(yaml.safe_load(KEPT))
    config = Config.load(tmp_path)
    assert config.approvals.mode == "off"
    assert config.get("mcp_servers")["two"]["args"] == ["--verbose", "--root=é/ü"]
    assert config.get("mcp_servers")["two"]["env"] == {
        "TOKEN": "0123",
        "EMPTY": None,
        "YES_WORD": True,
    }
