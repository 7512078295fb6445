"""`talaria config show` (the real command line, in a process of its own) masks every secret the
config schema marks, whatever the keys inside are called: MCP servers' env and headers, the
keys, key commands and client headers of every model entry, the server's key, passwords in
URLs. What is not secret stays readable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from talaria.config_schema import SCHEMA

CONFIG = {
    "model": {
        "default": "qwen-coder",
        "api_key": "sk-model-canary-0001",
        "api_key_command": "pass show canary-0002",
        "options": {"timeout": 30, "default_headers": {"X-Org": "canary-0003-org"}},
    },
    "providers": {
        "big": {
            "model": "claude",
            "api_key": "canary-0004",
            "options": {"headers": {"A": "canary-0005"}},
        }
    },
    "fallback_providers": [
        {"provider": "openrouter", "model": "q", "api_key_command": "op read canary-0006"},
        {
            "model": "r",
            "api_key": "canary-0007",
            "fallback": [{"model": "s", "api_key": "canary-0008"}],
        },
    ],
    "auxiliary": {"compression": {"model": "small", "api_key": "canary-0009"}},
    "mcp_servers": {
        "github": {
            "command": "github-mcp",
            "args": ["--stdio"],
            "env": {"GH": "canary-0010-ghp", "LOG_LEVEL": "canary-0011", "N": 12345678901},
        },
        "tracker": {
            "url": "https://bot:canary-0012@tracker.example/mcp",
            "headers": {"X-Anything": "canary-0013", "Authorization": "Bearer canary-0014"},
        },
    },
    "store": {"url": "postgresql://talaria:canary-0015@db.internal/talaria"},
    "server": {"api_key": "canary-0016-server-key"},
}
CANARIES = [f"canary-{n:04}" for n in range(1, 17)] + ["12345678901"]


def talaria(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "talaria.cli.main", *argv, "--home", str(home)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_config_show_masks_every_secret_the_schema_marks(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    done = talaria(tmp_path, "config", "show")
    assert done.returncode == 0, done.stderr
    leaked = [canary for canary in CANARIES if canary in done.stdout]
    assert leaked == []
    shown = yaml.safe_load(done.stdout)
    github = shown["mcp_servers"]["github"]
    assert github["command"] == "github-mcp" and github["args"] == ["--stdio"]
    assert set(github["env"]) == {"GH", "LOG_LEVEL", "N"}  # names stay, values go
    assert shown["model"]["default"] == "qwen-coder"
    assert shown["model"]["options"]["timeout"] == 30
    assert shown["model"]["api_key"] == "…0001"  # the tail tells keys apart
    assert shown["store"]["url"] == "postgresql://talaria:…@db.internal/talaria"
    assert shown["mcp_servers"]["tracker"]["url"] == "https://bot:…@tracker.example/mcp"


def test_every_key_the_schema_calls_secret_is_masked(tmp_path: Path) -> None:
    secret_keys = [key for key, rule in SCHEMA.items() if "" in rule.secret]
    assert {"model.api_key", "model.api_key_command", "server.api_key"} <= set(secret_keys)
    config: dict[str, Any] = {}
    for key in secret_keys:
        section, leaf = key.rsplit(".", 1)
        config.setdefault(section, {})[leaf] = f"canary-of-{key}-xyz"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    done = talaria(tmp_path, "config", "show")
    assert done.returncode == 0, done.stderr
    assert [key for key in secret_keys if f"canary-of-{key}" in done.stdout] == []


def test_config_set_and_its_errors_never_print_a_secret(tmp_path: Path) -> None:
    done = talaria(
        tmp_path, "config", "set", "mcp_servers.x", "{command: y, env: {T: canary-0099}}"
    )
    assert done.returncode == 0, done.stderr
    assert "canary-0099" not in done.stdout + done.stderr and "command" in done.stdout
    wrong = talaria(tmp_path, "config", "set", "server.api_key", "123456789012345")
    assert wrong.returncode != 0 and "server.api_key" in wrong.stderr
    assert "123456789012345" not in wrong.stdout + wrong.stderr
