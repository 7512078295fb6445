"""Prompt-cache breakpoints: the limit of 4, purity, and where the markers land."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from talaria.providers.cache_markers import (
    apply_cache_markers,
    apply_openai_format_cache_markers,
    cache_control,
    count_markers,
)

EPHEMERAL = {"type": "ephemeral"}

thinking_blocks = st.just({"type": "thinking", "thinking": "t", "signature": "s"})
plain_blocks = st.builds(
    lambda text: {"type": "text", "text": text}, st.text(min_size=1, max_size=5)
)
marked_blocks = st.builds(
    lambda text: {"type": "text", "text": text, "cache_control": EPHEMERAL},
    st.text(min_size=1, max_size=5),
)
any_block = st.one_of(plain_blocks, plain_blocks, plain_blocks, thinking_blocks, marked_blocks)
anthropic_messages = st.lists(
    st.builds(
        lambda role, content: {"role": role, "content": content},
        st.sampled_from(["user", "assistant"]),
        st.one_of(st.text(max_size=5), st.lists(any_block, max_size=4)),
    ),
    max_size=8,
)
systems = st.lists(st.one_of(plain_blocks, marked_blocks), max_size=3)
tool_lists = st.lists(
    st.builds(
        lambda name, marked: {
            "name": name,
            "input_schema": {"type": "object"},
            **({"cache_control": EPHEMERAL} if marked else {}),
        },
        st.from_regex(r"[a-z]{1,8}", fullmatch=True),
        st.booleans(),
    ),
    max_size=3,
)


def _marked(block: Any) -> bool:
    return isinstance(block, dict) and "cache_control" in block


@settings(max_examples=300)
@given(systems, anthropic_messages, tool_lists, st.sampled_from(["5m", "1h"]))
def test_never_more_than_four_markers_and_inputs_untouched(
    system: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    ttl: str,
) -> None:
    before = copy.deepcopy((system, messages, tools))
    existing = count_markers(system, messages, tools)
    new_system, new_messages, new_tools = apply_cache_markers(system, messages, tools, ttl=ttl)
    assert (system, messages, tools) == before
    assert count_markers(new_system, new_messages, new_tools) <= max(4, existing)
    assert new_tools == tools
    assert len(new_messages) == len(messages)


@settings(max_examples=300)
@given(
    st.lists(plain_blocks, max_size=3),
    st.lists(
        st.builds(
            lambda role, blocks: {"role": role, "content": blocks},
            st.sampled_from(["user", "assistant"]),
            st.lists(plain_blocks, min_size=1, max_size=3),
        ),
        max_size=8,
    ),
)
def test_unmarked_input_gets_system_and_last_three(
    system: list[dict[str, Any]], messages: list[dict[str, Any]]
) -> None:
    new_system, new_messages, _ = apply_cache_markers(system, messages, [])
    assert [_marked(b) for b in new_system] == [i == len(system) - 1 for i in range(len(system))]
    for position, message in enumerate(new_messages):
        recent = position >= len(messages) - 3
        flags = [_marked(b) for b in message["content"]]
        assert flags == [False] * (len(flags) - 1) + [recent]
    assert count_markers(new_system, new_messages, []) == bool(system) + min(3, len(messages))


def test_budget_counts_markers_already_present_and_prefers_the_newest_messages() -> None:
    tools = [{"name": "a", "input_schema": {"type": "object"}, "cache_control": EPHEMERAL}] * 2
    system = [{"type": "text", "text": "sys"}]
    messages = [{"role": r, "content": f"m{i}"} for i, r in enumerate(["user", "assistant"] * 3)]
    new_system, new_messages, _ = apply_cache_markers(system, messages, tools)
    assert _marked(new_system[0])
    assert [_marked(m["content"][-1]) for m in new_messages] == [False] * 5 + [True]


def test_thinking_blocks_never_carry_a_marker() -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    text = {"type": "text", "text": "answer"}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [text, thinking]},
        {"role": "assistant", "content": [thinking]},
    ]
    _, marked, _ = apply_cache_markers([], messages, [])
    assert _marked(marked[1]["content"][0])
    assert not _marked(marked[1]["content"][1])
    assert not _marked(marked[2]["content"][0])


def test_string_content_becomes_a_marked_text_block_and_empty_text_is_not_invented() -> None:
    _, marked, _ = apply_cache_markers([], [{"role": "user", "content": "hi"}], [])
    assert marked[0]["content"] == [{"type": "text", "text": "hi", "cache_control": EPHEMERAL}]
    _, empty, _ = apply_cache_markers([], [{"role": "assistant", "content": ""}], [])
    assert empty[0]["content"] == ""


def test_ttl_spelling() -> None:
    assert cache_control("5m") == {"type": "ephemeral"}
    assert cache_control("1h") == {"type": "ephemeral", "ttl": "1h"}
    with pytest.raises(ValueError, match="ttl"):
        cache_control("10m")
    system, _, _ = apply_cache_markers([{"type": "text", "text": "s"}], [], [], ttl="1h")
    assert system[0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


openai_messages = st.lists(
    st.builds(
        lambda role, content: {"role": role, "content": content},
        st.sampled_from(["system", "user", "assistant", "tool"]),
        st.one_of(
            st.none(),
            st.text(max_size=5),
            st.lists(plain_blocks, max_size=3),
            st.lists(marked_blocks, min_size=1, max_size=2),
        ),
    ),
    max_size=10,
)


def _openai_count(messages: list[dict[str, Any]]) -> int:
    total = 0
    for message in messages:
        total += _marked(message)
        if isinstance(message.get("content"), list):
            total += sum(_marked(p) for p in message["content"])
    return total


@settings(max_examples=300)
@given(openai_messages, st.sampled_from(["5m", "1h"]))
def test_openai_format_limit_and_purity(messages: list[dict[str, Any]], ttl: str) -> None:
    before = copy.deepcopy(messages)
    marked = apply_openai_format_cache_markers(messages, ttl)
    assert messages == before
    assert _openai_count(marked) <= max(4, _openai_count(messages))
    assert [m["role"] for m in marked] == [m["role"] for m in messages]


def test_openai_format_marks_system_and_last_three() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "result"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        },
    ]
    marked = apply_openai_format_cache_markers(messages, "5m")
    assert marked[0]["content"] == [{"type": "text", "text": "sys", "cache_control": EPHEMERAL}]
    assert marked[1] == messages[1]
    assert marked[2] == messages[2], "a tool-calls-only turn has no content part to mark"
    assert marked[3]["content"][0]["cache_control"] == EPHEMERAL
    assert marked[4]["content"] == [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b", "cache_control": EPHEMERAL},
    ]
