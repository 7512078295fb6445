"""Inline reasoning tags are split from the visible answer, whatever the stream's chunking."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from talaria.messages.think import ThinkSplitter, strip_think


@pytest.mark.parametrize(
    ("text", "visible", "reasoning"),
    [
        ("plain answer", "plain answer", ""),
        ("<think>plan</think>Answer", "Answer", "plan"),
        ("<thinking>a</thinking>B<reasoning>c</reasoning>D", "BD", "ac"),
        ("<think>cut off by the output limit", "", "cut off by the output limit"),
        ("<think>a</thinking>b</think>c", "c", "a</thinking>b"),
        ("done</think> stray", "done</think> stray", ""),
        ("1 < 2 and <thin", "1 < 2 and <thin", ""),
        ("<THINK>not a tag</THINK>", "<THINK>not a tag</THINK>", ""),
    ],
)
def test_strip_think_whole_text(text: str, visible: str, reasoning: str) -> None:
    assert strip_think(text) == (visible, reasoning)


def test_splitter_holds_a_tag_cut_across_chunks() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("Hi <th") == ("Hi ", "")
    assert splitter.feed("ink>sec") == ("", "sec")
    assert splitter.in_reasoning
    assert splitter.feed("ret</thi") == ("", "ret")
    assert splitter.feed("nk> there") == (" there", "")
    assert splitter.flush() == ("", "")


def test_flush_releases_what_was_not_a_tag() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("a <thin") == ("a ", "")
    assert splitter.flush() == ("<thin", "")


PIECES = [
    "<think>",
    "</think>",
    "<thinking>",
    "</thinking>",
    "<reasoning>",
    "</reasoning>",
    "<",
    ">",
    "/",
    "<th",
    "ink>",
    "a",
    "b c",
    "\n",
]


@given(
    parts=st.lists(st.sampled_from(PIECES), max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_any_chunking_matches_the_whole_text(parts: list[str], cuts: list[int]) -> None:
    text = "".join(parts)
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    splitter = ThinkSplitter()
    visible, reasoning = [], []
    for start, end in itertools.pairwise(bounds):
        shown, thought = splitter.feed(text[start:end])
        visible.append(shown)
        reasoning.append(thought)
    shown, thought = splitter.flush()
    assert ("".join([*visible, shown]), "".join([*reasoning, thought])) == strip_think(text)
