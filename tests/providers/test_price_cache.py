"""Prices found once are kept on disk: a later process prices the same model without loading
the catalogue (a quarter of a second of imports), and gets the catalogue's own answer."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import run_python
from talaria.core import Usage
from talaria.providers import price_cache
from talaria.providers.pricing import estimate_cost

PRICE = """
import json, sys
from talaria.core import Usage
from talaria.providers.pricing import estimate_cost

usage = Usage(input_tokens=120_000, cache_read_tokens=30_000, output_tokens=4_000)
cost = estimate_cost(sys.argv[1], usage, sys.argv[2] or None)
print(json.dumps({"cost": cost, "catalogue_loaded": "genai_prices" in sys.modules}))
"""

USAGE = Usage(input_tokens=120_000, cache_read_tokens=30_000, output_tokens=4_000)


def price_in_a_fresh_process(cache: Path, model: str, provider: str) -> dict[str, object]:
    """Run with TALARIA_CACHE_DIR at `cache` (the `cache` fixture sets it)."""
    assert os.environ["TALARIA_CACHE_DIR"] == str(cache)
    answer: dict[str, object] = json.loads(run_python(PRICE, model, provider, cwd=cache))
    return answer


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("TALARIA_CACHE_DIR", str(tmp_path))
    price_cache.forget()
    yield tmp_path
    price_cache.forget()


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("gpt-4.1", "openai"),
        ("claude-sonnet-4-5", "anthropic"),  # tiered: linear below its first tier
        ("claude-sonnet-4-6", "anthropic"),  # a dated price follows its first one
        ("anthropic/claude-sonnet-4", "openrouter"),
    ],
)
def test_a_later_process_prices_from_the_cache_what_the_catalogue_says(
    cache: Path, model: str, provider: str
) -> None:
    first = price_in_a_fresh_process(cache, model, provider)
    second = price_in_a_fresh_process(cache, model, provider)

    assert first["catalogue_loaded"] is True
    assert second["catalogue_loaded"] is False
    assert isinstance(first["cost"], float) and first["cost"] > 0
    assert second["cost"] == pytest.approx(first["cost"], rel=1e-12)


def test_a_model_the_catalogue_does_not_know_is_remembered_as_unknown(cache: Path) -> None:
    first = price_in_a_fresh_process(cache, "my-finetune-7b", "custom")
    second = price_in_a_fresh_process(cache, "my-finetune-7b", "custom")

    assert first["cost"] is None and second["cost"] is None
    assert second["catalogue_loaded"] is False


def test_prices_of_another_catalogue_release_are_not_used(cache: Path) -> None:
    assert estimate_cost("gpt-4.1", USAGE, "openai") is not None
    stored = json.loads((cache / "prices.json").read_text())
    stored["catalogue"] = "an older release"
    stored["prices"]["openai/gpt-4.1"]["price"] = [0, 1, 1, 1, 1, None]  # a dollar a token
    (cache / "prices.json").write_text(json.dumps(stored))
    price_cache.forget()

    assert estimate_cost("gpt-4.1", USAGE, "openai") == pytest.approx(
        0.24 + 0.015 + 0.032  # gpt-4.1: $2 in, $0.5 cached, $8 out per million
    )


def test_a_price_past_its_date_is_asked_again(cache: Path) -> None:
    expected = estimate_cost("gpt-4.1", USAGE, "openai")
    stored = json.loads((cache / "prices.json").read_text())
    entry = stored["prices"]["openai/gpt-4.1"]
    entry["price"], entry["before"] = [0, 1, 1, 1, 1, None], 1_000_000_000.0  # ended in 2001
    (cache / "prices.json").write_text(json.dumps(stored))
    price_cache.forget()

    assert estimate_cost("gpt-4.1", USAGE, "openai") == pytest.approx(expected)


@pytest.mark.parametrize("garbage", ["", "{not json", "[]", '{"catalogue": 1, "prices": []}'])
def test_a_damaged_cache_file_is_replaced(cache: Path, garbage: str) -> None:
    (cache / "prices.json").write_text(garbage)
    price_cache.forget()

    assert estimate_cost("gpt-4.1", USAGE, "openai") == pytest.approx(0.287)
    stored = json.loads((cache / "prices.json").read_text())
    assert "openai/gpt-4.1" in stored["prices"]


def test_an_entry_of_the_wrong_shape_is_asked_again(cache: Path) -> None:
    estimate_cost("gpt-4.1", USAGE, "openai")
    stored = json.loads((cache / "prices.json").read_text())
    stored["prices"]["openai/gpt-4.1"] = {"price": ["cheap"]}
    (cache / "prices.json").write_text(json.dumps(stored))
    price_cache.forget()

    assert estimate_cost("gpt-4.1", USAGE, "openai") == pytest.approx(0.287)


def test_prices_are_right_where_the_cache_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("TALARIA_CACHE_DIR", str(blocked / "cache"))
    price_cache.forget()
    try:
        assert estimate_cost("gpt-4.1", USAGE, "openai") == pytest.approx(0.287)
        assert estimate_cost("my-finetune-7b", USAGE, "custom") is None
    finally:
        price_cache.forget()
    assert blocked.read_text() == "not a directory"


def test_two_processes_keep_both_of_their_models(cache: Path) -> None:
    price_in_a_fresh_process(cache, "gpt-4.1", "openai")
    price_in_a_fresh_process(cache, "gpt-4o-mini", "openai")

    stored = json.loads((cache / "prices.json").read_text())
    assert {"openai/gpt-4.1", "openai/gpt-4o-mini"} <= set(stored["prices"])
    assert list(cache.glob("*.tmp")) == []


def test_a_cache_file_far_larger_than_any_talaria_writes_is_not_read(cache: Path) -> None:
    from talaria import user_cache

    padding = " " * (user_cache.MAX_BYTES + 1)
    (cache / "prices.json").write_text('{"catalogue": null, "prices": {}}' + padding)
    price_cache.forget()

    assert user_cache.read("prices.json") is None
    assert estimate_cost("gpt-4.1", USAGE, "openai") == pytest.approx(0.287)
    assert (cache / "prices.json").stat().st_size < 10_000  # replaced by what talaria writes
