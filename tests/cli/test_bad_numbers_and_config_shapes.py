"""Out-of-range numbers on the command line and config files of a dangerous shape are one
clear line and exit 2, found before anything runs (not an `OverflowError` from a socket or
the database, not minutes spent expanding YAML aliases)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from talaria.cli.main import main
from talaria.config import Config, ConfigError
from talaria.store.sqlite import SQLiteSessionStore

BILLION_LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{name}: &{name} [{','.join([f'*{previous}'] * 9)}]\n"
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
)


def _usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "OverflowError" not in err
    return err.strip().splitlines()[-1]


def test_a_port_out_of_range_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    line = _usage_error(capsys, "serve", "--port", "99999")
    assert line.endswith("argument --port: expected a whole number from 0 to 65535, got '99999'")


def test_a_huge_limit_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with SQLiteSessionStore(tmp_path / "state.db") as store:
        store.create_session("s1")
    huge = "9" * 30
    line = _usage_error(capsys, "sessions", "list", "--home", str(tmp_path), "--limit", huge)
    assert "argument --limit: expected a whole number from 1 to 1000000" in line
    assert "argument --max-turns: expected a whole number from 1" in _usage_error(
        capsys, "chat", "-q", "hi", "--max-turns", huge
    )


def test_an_unknown_context_engine_module_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("context:\n  engine: no_such_engines.mod:Engine\n")
    done = subprocess.run(
        [sys.executable, "-m", "talaria.cli.main", "chat", "-q", "hi", "--home", str(tmp_path),
         "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--api-key", "k"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "talaria: context.engine 'no_such_engines.mod:Engine': cannot import no_such_engines.mod "
        "(No module named 'no_such_engines'); fix context.engine in config.yaml "
        "(or set it to 'default')"
    )


def test_a_context_engine_that_is_not_a_module_path_is_refused_at_load(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("context:\n  engine: not a path\n")
    with pytest.raises(ConfigError, match=r'context\.engine: found "not a path", expected'):
        Config.load(tmp_path)


def test_nested_aliases_are_refused_at_once(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(BILLION_LAUGHS)
    done = subprocess.run(
        [sys.executable, "-m", "talaria.cli.main", "config", "show", "--home", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "aliases (*name) expand to more than 100,000 values" in done.stderr


@pytest.mark.parametrize(
    "text",
    [
        "a: &a [*a]\n",
        "a: " + "[" * 5000 + "]" * 5000 + "\n",
        "a:\n" + "".join(" " * (2 * i + 2) + "k:\n" for i in range(100)),
    ],
    ids=["refers-to-itself", "deep-flow", "deep-block"],
)
def test_self_reference_and_deep_nesting_are_refused(tmp_path: Path, text: str) -> None:
    (tmp_path / "config.yaml").write_text(text)
    with pytest.raises(ConfigError, match="nested deeper than 64 levels"):
        Config.load(tmp_path)


def test_a_few_ordinary_aliases_still_load(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "x-args: &args [--verbose]\n"
        "mcp_servers:\n  one: {command: a, args: *args}\n  two: {command: b, args: *args}\n"
    )
    config = Config.load(tmp_path)
    assert config.get("mcp_servers")["two"]["args"] == ["--verbose"]
