"""Cost estimates and model metadata (context windows): what a user sees in usage and limits."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import serving
from talaria.core import Usage
from talaria.providers.pricing import estimate_cost
from talaria.providers.profiles.context_windows import context_window, fetch_endpoint_context_length
from talaria.testing.server import ScriptedProvider

MILLION = 1_000_000


def test_known_model_is_priced_per_million_tokens() -> None:
    usage = Usage(input_tokens=MILLION, output_tokens=MILLION)
    assert estimate_cost("gpt-4.1", usage, "openai") == pytest.approx(2.0 + 8.0)


def _catalogue(model: str, usage: Usage, provider: str) -> float:
    """The catalogue's own answer, asked the slow way for every call."""
    from genai_prices import Usage as CatalogueUsage
    from genai_prices import calc_price

    counted = CatalogueUsage(
        input_tokens=usage.prompt_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
    )
    return float(calc_price(counted, model, provider_id=provider).total_price)


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(
        [
            ("gpt-4o-mini", "openai"),
            ("gpt-4.1", "openai"),
            ("claude-sonnet-4-5", "anthropic"),  # tiered: past 200k tokens every token costs more
            ("gemini-2.5-pro", "google"),  # tiered too
            ("anthropic/claude-sonnet-4", "openrouter"),
        ]
    ),
    fresh=st.integers(0, 400_000),
    read=st.integers(0, 150_000),
    written=st.integers(0, 50_000),
    output=st.integers(0, 30_000),
)
def test_every_call_costs_what_the_catalogue_says(
    model: tuple[str, str], fresh: int, read: int, written: int, output: int
) -> None:
    usage = Usage(
        input_tokens=fresh, cache_read_tokens=read, cache_write_tokens=written, output_tokens=output
    )
    name, provider = model
    assert estimate_cost(name, usage, provider) == pytest.approx(
        _catalogue(name, usage, provider), rel=1e-12, abs=1e-15
    )


def test_a_tiered_price_jumps_where_the_catalogue_says() -> None:
    below = Usage(input_tokens=199_000)
    above = Usage(input_tokens=201_000)
    cost_below = estimate_cost("claude-sonnet-4-5", below, "anthropic")
    cost_above = estimate_cost("claude-sonnet-4-5", above, "anthropic")
    assert cost_below is not None and cost_above is not None
    assert cost_above / 201_000 > cost_below / 199_000 * 1.5  # the whole prompt pays more
    assert cost_above == _catalogue("claude-sonnet-4-5", above, "anthropic")


def test_cached_input_is_cheaper_than_fresh_input() -> None:
    fresh = estimate_cost("claude-sonnet-4-5", Usage(input_tokens=100_000), "anthropic")
    cached = estimate_cost("claude-sonnet-4-5", Usage(cache_read_tokens=100_000), "anthropic")
    assert fresh is not None and cached is not None
    assert 0 < cached < fresh


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("openai/gpt-4.1", None),
        ("openai/gpt-4.1", "openai"),
        ("gpt-4.1", None),
        ("gpt-4.1", "codex"),
    ],
)
def test_provider_prefixes_are_understood(model: str, provider: str | None) -> None:
    usage = Usage(input_tokens=MILLION)
    assert estimate_cost(model, usage, provider) == estimate_cost("gpt-4.1", usage, "openai")


def test_openrouter_ids_are_priced() -> None:
    cost = estimate_cost("anthropic/claude-sonnet-4", Usage(output_tokens=MILLION), "openrouter")
    assert cost is not None and cost > 0


def test_unknown_model_has_no_price() -> None:
    assert estimate_cost("my-finetune-7b", Usage(input_tokens=10), "custom") is None
    assert estimate_cost("nobody/nothing", Usage(input_tokens=10), None) is None


def test_local_models_cost_nothing() -> None:
    assert estimate_cost("llama3.1:8b", Usage(input_tokens=MILLION), "ollama") == 0.0


def test_context_window_sources_in_order_of_trust(caplog: pytest.LogCaptureFixture) -> None:
    assert context_window("gpt-4.1", configured=50_000, endpoint_metadata=8192) == (
        50_000,
        "config",
    )
    assert context_window("gpt-4.1", configured=None, endpoint_metadata=8192) == (8192, "endpoint")
    assert context_window("gpt-4.1-mini", configured=None, endpoint_metadata=None) == (
        1_047_576,
        "table",
    )
    assert caplog.records == []
    with caplog.at_level(logging.INFO):
        assert context_window("house-model", configured=None, endpoint_metadata=None) == (
            128_000,
            "default",
        )
    assert "house-model" in caplog.text
    # a guess is logged, not printed: the context engine warns once, when it matters
    assert all(record.levelno < logging.WARNING for record in caplog.records)


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("anthropic/claude-sonnet-4", 200_000),
        ("gpt-4o-mini-2024-07-18", 128_000),
        ("gpt-4", 8192),
        ("gpt-4-turbo-2024-04-09", 128_000),
        ("o1-mini", 128_000),
        ("o3", 200_000),
        ("gpt-5-codex", 400_000),
    ],
)
def test_table_matches_the_longest_prefix(model: str, window: int) -> None:
    assert context_window(model, configured=None, endpoint_metadata=None) == (window, "table")


async def test_endpoint_metadata_from_the_models_list() -> None:
    with ScriptedProvider(model="local-model", context_length=32_768) as server:
        found = await fetch_endpoint_context_length(server.openai_base_url, "key", "local-model")
    assert found == 32_768


@pytest.fixture
def models_server() -> Iterator[dict[str, Any]]:
    """A /v1/models endpoint whose payload each test sets."""
    state: dict[str, Any] = {"payload": {}, "status": 200}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = json.dumps(state["payload"]).encode()
            self.send_response(state["status"])
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as httpd:
        state["url"] = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        yield state


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"id": "m", "context_length": 200_000}, 200_000),  # OpenRouter
        ({"id": "m", "max_model_len": 32_768}, 32_768),  # vLLM
        ({"id": "m", "meta": {"n_ctx_train": 8192}}, 8192),  # llama.cpp
        ({"id": "m", "top_provider": {"context_length": 64_000}}, 64_000),
        ({"id": "m"}, None),
    ],
)
async def test_endpoint_metadata_shapes(
    models_server: dict[str, Any], entry: dict[str, Any], expected: int | None
) -> None:
    other = {"id": "other", "context_length": 1}
    models_server["payload"] = {"object": "list", "data": [other, entry]}
    assert await fetch_endpoint_context_length(models_server["url"], None, "m") == expected


async def test_single_model_server_answers_for_any_name(models_server: dict[str, Any]) -> None:
    models_server["payload"] = {"data": [{"id": "/models/qwen.gguf", "max_model_len": 16_384}]}
    assert await fetch_endpoint_context_length(models_server["url"], None, "qwen") == 16_384


@pytest.mark.parametrize("payload", [{"error": "nope"}, ["not", "a", "dict"], {"data": "x"}])
async def test_endpoint_metadata_failures_are_none(
    models_server: dict[str, Any], payload: Any
) -> None:
    models_server["payload"] = payload
    assert await fetch_endpoint_context_length(models_server["url"], None, "m") is None


async def test_unreachable_or_failing_endpoint_is_none(models_server: dict[str, Any]) -> None:
    models_server["status"] = 500
    models_server["payload"] = {"data": [{"id": "m", "context_length": 5}]}
    assert await fetch_endpoint_context_length(models_server["url"], None, "m") is None
    assert await fetch_endpoint_context_length("http://127.0.0.1:9/v1", None, "m") is None
