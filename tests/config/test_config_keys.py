"""The schema knows every key talaria reads, and the documentation's example configs load clean."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import yaml

from talaria.cli.config_cmd import OPEN_SECTIONS
from talaria.config import Config
from talaria.config_schema import SCHEMA, SECTIONS, problems, unknown_keys

ROOT = Path(__file__).resolve().parents[2]
DOTTED = re.compile(r"""config_?\w*\.?get\(\s*["']([a-z_]+(?:\.[a-z_]+)*)["']""")
ATTRIBUTES = re.compile(r"config\.([a-z_]+(?:\.[a-z_]+)*)")


def read_keys() -> set[str]:
    """Every literal key passed to a config getter, and every setting read as an attribute
    (`config.agent.max_iterations`), anywhere in the package."""
    found: set[str] = set()
    for source in (ROOT / "src" / "talaria").rglob("*.py"):
        text = source.read_text(encoding="utf-8")
        found.update(DOTTED.findall(text))
        found.update(_setting(chain) for chain in ATTRIBUTES.findall(text))
    return found - {""}


def _setting(chain: str) -> str:
    """The setting an attribute chain reads: up to the first schema key (a method called on
    its value is not part of it)."""
    parts = chain.split(".")
    if parts[0] not in SECTIONS and parts[0] not in SCHEMA:
        return ""  # the Config's own members (data, home, get), or not a Config at all
    for end in range(1, len(parts) + 1):
        if ".".join(parts[:end]) in SCHEMA:
            return ".".join(parts[:end])
    return chain


def test_every_key_the_code_reads_is_in_the_schema() -> None:
    keys = read_keys()
    assert len(keys) > 50, "the scan finds the config reads"
    known = set(SCHEMA) | SECTIONS
    missing = sorted(
        key for key in keys if key not in known and key.split(".")[0] not in OPEN_SECTIONS
    )
    assert missing == []


def readme_configs() -> list[str]:
    """The YAML examples of the documentation (README.md and docs/*.md)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    return re.findall(r"```yaml\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("block", readme_configs())
def test_the_readme_example_configs_load_clean(
    tmp_path: Path, block: str, caplog: pytest.LogCaptureFixture
) -> None:
    data = yaml.safe_load(block)
    assert problems(data) == [] and unknown_keys(data) == []
    (tmp_path / "config.yaml").write_text(block)
    with caplog.at_level(logging.WARNING, logger="talaria.config"):
        config = Config.load(tmp_path)
    assert caplog.records == []
    first = next(iter(data))
    assert config.get(first) is not None


def test_the_readme_shows_a_config_with_the_later_sections() -> None:
    sections = set().union(*(yaml.safe_load(block).keys() for block in readme_configs()))
    for section in ("sandbox", "telemetry", "store", "server", "mcp_servers", "delegation"):
        assert section in sections


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("server:\n  port: 70000\n", "server.port: found 70000, expected a whole number"),
        ("store:\n  pool_size: 0\n", "store.pool_size: found 0"),
        ("prompt:\n  profile: tiny\n", 'prompt.profile: found "tiny", expected auto | full'),
        ("providers:\n  big: 5\n", "providers.big: found 5, expected a mapping"),
        ("durable:\n  lease_ttl: -1\n", "durable.lease_ttl: found -1, expected a positive"),
        ("profiles:\n  qwen*: {stream_usag: 1}\n", "profiles.qwen*.stream_usag: unknown profile"),
    ],
)
def test_the_later_sections_are_checked_too(tmp_path: Path, text: str, message: str) -> None:
    from talaria import ConfigError

    (tmp_path / "config.yaml").write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        Config.load(tmp_path)
