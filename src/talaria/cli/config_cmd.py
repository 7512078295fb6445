"""`talaria config show|set|path`: read and change $TALARIA_HOME/config.yaml.

`set` parses the value as YAML (so `90` is a number, `true` a bool, `[a, b]` a list), refuses
keys talaria does not know (suggesting the closest one), and keeps the old file when the new
value would make the configuration invalid.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from talaria.cli.main import EXIT_AGENT_FAILURE, EXIT_OK

OPEN_SECTIONS = frozenset(
    {"auxiliary", "fallback_providers", "command_allowlist", "mcp_servers", "providers", "profiles"}
)
"""Sections whose keys are the user's to choose (e.g. auxiliary.<task>.model)."""


def check_key(key: str) -> str | None:
    """None when `key` is a setting talaria reads; otherwise why not, with a suggestion."""
    from talaria.config_schema import ALIASES, SCHEMA, suggestion

    if key in SCHEMA or key in ALIASES or key.split(".", 1)[0] in OPEN_SECTIONS:
        return None
    return f"unknown setting {key!r}{suggestion(key)}"


def _home(args: argparse.Namespace) -> Path:
    from talaria.config import default_home

    return Path(args.home).expanduser() if args.home else default_home()


def run_config(args: argparse.Namespace) -> int:
    from talaria.config import ConfigError

    home = _home(args)
    try:
        if args.action == "path":
            print(home / "config.yaml")
            return EXIT_OK
        if args.action == "show":
            return _show(home)
        return _set(home, args.key, args.value)
    except ConfigError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return EXIT_AGENT_FAILURE


def _show(home: Path) -> int:
    import yaml

    from talaria.config import Config
    from talaria.config_masking import masked

    config = Config.load(home)
    path = home / "config.yaml"
    state = "" if path.exists() else " (not created yet)"
    print(f"# {path}{state}")
    print("# effective settings: config.yaml > environment > defaults")
    print(yaml.safe_dump(masked(config.data), sort_keys=False, allow_unicode=True), end="")
    return EXIT_OK


def _set(home: Path, key: str | None, raw: str | None) -> int:
    """Write one key. The new value is checked first; problems the file already had elsewhere
    do not block the change (that is how a broken file gets repaired), they are reported."""
    import yaml

    from talaria.config import ConfigError, read_config_file
    from talaria.config_masking import masked_setting
    from talaria.config_schema import as_meant, check_value, problems
    from talaria.config_write import set_config_value

    if not key or raw is None:
        print("talaria: usage: talaria config set <key> <value>", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    problem = check_key(key)
    if problem:
        print(f"talaria: {problem}", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    try:
        value = as_meant({key: yaml.safe_load(raw)})[key]  # `off` stays the word "off"
    except yaml.YAMLError:
        value = raw
    path = home / "config.yaml"
    check_value(key, value, f"{path} (new value)")
    try:
        set_config_value(path, key, value)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be written: {exc.strerror or exc}") from None
    shown = masked_setting(key, value)
    print(f"{key} = {shown if isinstance(shown, str) else json.dumps(shown)}  ({path})")
    remaining = problems(read_config_file(path))
    for left in remaining:
        print(f"talaria: still to fix: {left.line(str(path))}", file=sys.stderr)
    return EXIT_AGENT_FAILURE if remaining else EXIT_OK
