"""Properties of the text tool-call reader over the shapes small models write: every rendering
of every call (JSON or Python literals, fenced, tagged, bare, with prose around, several in a
row) reads back as exactly those calls; prose without a call reads as none; no input makes it
raise; and the stream never shows a call, whatever the chunking, while anything else streams
whole."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from talaria.loop.held_text import HeldText
from talaria.loop.loose_json import loads
from talaria.loop.text_tool_calls import find_text_tool_calls
from talaria.providers.base import NullStream

TOOLS = ["write_file", "terminal", "read_file", "search_files", "todo"]
SAFE_TEXT = st.lists(
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=8)
    | st.sampled_from(["\n", "'", '"', "{", "}", "\\", "True", "null", "```", "</tool_call>"]),
    max_size=5,
).map("".join)
"""Argument strings: quotes, braces, backslashes, line breaks and the literal words included."""
PROSE = st.lists(
    st.text(
        st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\\{}[]<>`'\""),
        max_size=20,
    )
    | st.sampled_from(["\n", "I'll "]),
    max_size=5,
).map("".join)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**9), 10**9) | SAFE_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(SAFE_TEXT, inner, max_size=3),
    max_leaves=8,
)
ARGUMENTS = st.dictionaries(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), VALUES, max_size=4)
CALLS = st.tuples(st.sampled_from(TOOLS), ARGUMENTS)


def spelled(name: str, arguments: dict[str, Any], shape: str, literal: str) -> str:
    """One call in one of the shapes and spellings models use."""
    if shape == "parameters":
        value: dict[str, Any] = {"name": name, "parameters": arguments}
    elif shape == "function":
        value = {"type": "function", "function": {"name": name, "arguments": arguments}}
    elif shape == "string arguments":
        value = {"name": name, "arguments": json.dumps(arguments)}
    else:
        value = {"name": name, "arguments": arguments}
    if literal == "python":
        return repr(value)
    if literal == "pretty":
        return json.dumps(value, indent=2, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False)


def wrapped(body: str, frame: str) -> str:
    if frame == "fence":
        return f"```json\n{body}\n```"
    if frame == "tag":
        return f"<tool_call>\n{body}\n</tool_call>"
    if frame == "python tag":
        return f"<|python_tag|>{body}"
    return body


SHAPES = st.sampled_from(["arguments", "parameters", "function", "string arguments"])
LITERALS = st.sampled_from(["json", "pretty", "python"])
FRAMES = st.sampled_from(["bare", "fence", "tag", "python tag"])


@settings(max_examples=150, deadline=None)
@given(
    calls=st.lists(st.tuples(CALLS, SHAPES, LITERALS, FRAMES), min_size=1, max_size=3),
    before=PROSE,
    after=PROSE,
)
def test_every_spelling_of_every_call_reads_back_as_those_calls(
    calls: list[Any], before: str, after: str
) -> None:
    parts = [wrapped(spelled(n, a, shape, lit), frame) for (n, a), shape, lit, frame in calls]
    answer = f"{before}\n" + "\n".join(parts) + f"\n{after}"
    found = find_text_tool_calls(answer, TOOLS)
    assert found is not None
    assert [(c.name, json.loads(c.arguments)) for c in found.calls] == [c[0] for c in calls]
    assert "{" not in found.text and found.text == found.text.strip()


@settings(max_examples=100, deadline=None)
@given(calls=st.lists(CALLS, min_size=1, max_size=3))
def test_several_objects_in_one_fence_or_array_are_several_calls(calls: list[Any]) -> None:
    objects = [json.dumps({"name": n, "arguments": a}) for n, a in calls]
    for answer in ("```json\n" + "\n".join(objects) + "\n```", "[" + ", ".join(objects) + "]"):
        found = find_text_tool_calls(answer, TOOLS)
        assert found is not None
        assert [(c.name, json.loads(c.arguments)) for c in found.calls] == calls


@settings(max_examples=100, deadline=None)
@given(prose=PROSE)
def test_prose_is_no_call(prose: str) -> None:
    assert find_text_tool_calls(prose + " {}", TOOLS) is None


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_no_input_makes_the_reader_raise(answer: str) -> None:
    find_text_tool_calls(answer, TOOLS)
    find_text_tool_calls("{" + answer, TOOLS)
    loads(answer)


def test_python_and_json_words_and_raw_line_breaks_decode() -> None:
    assert loads("{'a': True, 'b': None, 'c': False}") == {"a": True, "b": None, "c": False}
    assert loads('{"a": True, "b": null}') == {"a": True, "b": None}
    assert loads('{"content": "line one\nline two"}') == {"content": "line one\nline two"}
    assert loads("{'content': 'line one\nline two', 'ok': true}") == {
        "content": "line one\nline two",
        "ok": True,
    }
    assert loads("{'a': {1, 2}}") is None  # a set is not JSON
    assert loads("[" * 5000) is None


class Screen(NullStream):
    """What reached the screen."""

    def __init__(self) -> None:
        self.shown = ""

    def text(self, delta: str) -> None:
        self.shown += delta


def chunked(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


@settings(max_examples=150, deadline=None)
@given(
    call=st.tuples(CALLS, SHAPES, LITERALS, FRAMES),
    before=PROSE,
    cuts=st.lists(st.integers(0, 400), max_size=12),
)
def test_a_call_never_reaches_the_screen_however_it_streams(
    call: Any, before: str, cuts: list[int]
) -> None:
    (name, arguments), shape, literal, frame = call
    answer = f"{before}\n{wrapped(spelled(name, arguments, shape, literal), frame)}"
    screen = Screen()
    held = HeldText(screen)
    for piece in chunked(answer, cuts):
        held.text(piece)
    found = find_text_tool_calls(answer, TOOLS)
    assert found is not None
    held.drop(found.text)
    assert screen.shown == answer[: len(screen.shown)]
    assert "{" not in screen.shown and "<tool_call" not in screen.shown
    assert screen.shown.startswith(before.rstrip())  # the line breaks before a call wait


@settings(max_examples=150, deadline=None)
@given(
    answer=st.text(max_size=200)
    | st.sampled_from(["```python\nprint({'a': 1})\n```", "a {b} c", "<b>x</b> [1]"]),
    cuts=st.lists(st.integers(0, 250), max_size=12),
)
def test_an_answer_streams_whole_however_it_is_chunked(answer: str, cuts: list[int]) -> None:
    screen = Screen()
    held = HeldText(screen)
    for piece in chunked(answer, cuts):
        held.text(piece)
        assert answer.startswith(screen.shown)
    held.release(answer)
    assert screen.shown == answer
