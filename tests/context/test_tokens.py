"""Token estimates: script-aware text counts, whole messages, and the usage-anchored tracker."""

from __future__ import annotations

import json
from typing import Any

import pytest

from talaria.context.tokens import (
    IMAGE_TOKENS,
    ContextTracker,
    estimate_message_tokens,
    estimate_text_tokens,
    estimate_tokens,
)

ENGLISH = "The quick brown fox jumps over the lazy dog. " * 20
CHINESE = "我们今天去公园散步然后回家吃饭。" * 20
JAPANESE = "きょうはいいてんきですね。カタカナもあります。" * 20
KOREAN = "오늘은 날씨가 정말 좋습니다" * 20
RUSSIAN = "Быстрая коричневая лиса прыгает через ленивую собаку. " * 20


def test_latin_text_runs_about_four_characters_per_token() -> None:
    tokens = estimate_text_tokens(ENGLISH)
    assert len(ENGLISH) / 5 <= tokens <= len(ENGLISH) / 3
    assert estimate_text_tokens("") == 0
    assert estimate_text_tokens("a") == 1


def test_accented_latin_counts_like_ascii() -> None:
    french = "Le garçon a mangé une crème brûlée à côté de l'église. " * 10
    assert abs(estimate_text_tokens(french) - len(french) / 4) <= 2


def test_cjk_hangul_and_kana_cost_about_one_token_per_character() -> None:
    for text in (CHINESE, JAPANESE):
        assert estimate_text_tokens(text) >= 0.9 * len(text)
    hangul = sum(1 for ch in KOREAN if not ch.isspace())
    assert hangul <= estimate_text_tokens(KOREAN) <= len(KOREAN)
    same_length_english = ENGLISH[: len(CHINESE)]
    assert estimate_text_tokens(CHINESE) > 3 * estimate_text_tokens(same_length_english)


def test_other_scripts_cost_about_one_token_per_two_characters() -> None:
    tokens = estimate_text_tokens(RUSSIAN)
    assert len(RUSSIAN) / 3 <= tokens <= len(RUSSIAN) / 1.5


def test_mixed_text_adds_up_its_parts() -> None:
    mixed = ENGLISH + CHINESE
    expected = estimate_text_tokens(ENGLISH) + estimate_text_tokens(CHINESE)
    assert abs(estimate_text_tokens(mixed) - expected) <= 1


@pytest.mark.timeout(30)
def test_estimating_a_megabyte_of_text_ends() -> None:
    """No pattern backtracks on long mixed text (the timeout is a hang guard, not a target:
    bench/loop_overhead.py measures what estimates cost per step)."""
    text = (ENGLISH + CHINESE + RUSSIAN) * 400
    assert estimate_text_tokens(text) > len(text) / 4


def test_a_message_counts_its_content_tool_calls_and_overhead() -> None:
    arguments = json.dumps({"command": "grep -rn 'def main' src/ | head -50"})
    plain = {"role": "assistant", "content": "Searching."}
    with_call = {
        **plain,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "terminal", "arguments": arguments},
            }
        ],
    }
    base = estimate_message_tokens(plain)
    assert base > estimate_text_tokens("Searching.")
    added = estimate_message_tokens(with_call) - base
    assert added >= estimate_text_tokens(arguments) + estimate_text_tokens("terminal")


def test_images_count_a_fixed_amount_and_text_parts_count_their_text() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 50_000}}
    message = {"role": "user", "content": [{"type": "text", "text": ENGLISH}, image]}
    tokens = estimate_message_tokens(message)
    text_only = estimate_message_tokens({"role": "user", "content": ENGLISH})
    assert tokens - text_only == IMAGE_TOKENS


def test_empty_and_tool_messages_are_counted() -> None:
    assert estimate_message_tokens({"role": "assistant", "content": None}) > 0
    tool = {"role": "tool", "tool_call_id": "c1", "content": "x" * 400}
    assert estimate_message_tokens(tool) >= 100


def test_tool_schemas_add_to_the_request_estimate() -> None:
    messages = [{"role": "user", "content": "hi"}]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a text file and return numbered lines. " * 5,
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
    ]
    assert estimate_tokens(messages, tools) - estimate_tokens(messages) >= 60


def conversation(turns: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    for turn in range(turns):
        history.append({"role": "user", "content": f"question {turn} " + ENGLISH})
        history.append({"role": "assistant", "content": f"answer {turn} " + ENGLISH})
    return history


def test_without_usage_the_tracker_gives_a_full_estimate() -> None:
    history = conversation(3)
    assert ContextTracker().estimate(history) == estimate_tokens(history)


def test_the_tracker_builds_on_the_providers_real_count() -> None:
    history = conversation(3)
    tracker = ContextTracker()
    tracker.record_usage(prompt_tokens=50_000, message_count=len(history))
    assert tracker.estimate(history) == 50_000
    history.append({"role": "user", "content": "one more " + CHINESE})
    grown = tracker.estimate(history)
    assert grown == 50_000 + estimate_message_tokens(history[-1])
    history.append({"role": "assistant", "content": "ok"})
    assert tracker.estimate(history) > grown


def test_a_shrunk_history_falls_back_to_a_full_estimate() -> None:
    history = conversation(10)
    tracker = ContextTracker()
    tracker.record_usage(prompt_tokens=90_000, message_count=len(history))
    compressed = [history[0], {"role": "user", "content": "summary of earlier work"}, history[-1]]
    assert tracker.estimate(compressed) == estimate_tokens(compressed)


def test_reset_drops_the_anchor() -> None:
    history = conversation(2)
    tracker = ContextTracker()
    tracker.record_usage(prompt_tokens=70_000, message_count=len(history))
    tracker.reset()
    assert tracker.estimate(history) == estimate_tokens(history)


def test_a_zero_usage_report_does_not_replace_a_real_anchor() -> None:
    """Some endpoints omit usage (reported as 0); that must not zero the context size."""
    history = conversation(2)
    tracker = ContextTracker()
    tracker.record_usage(prompt_tokens=8_000, message_count=len(history))
    tracker.record_usage(prompt_tokens=0, message_count=len(history))
    assert tracker.estimate(history) == 8_000
