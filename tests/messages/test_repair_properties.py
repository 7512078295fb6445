"""Property tests: whatever a history looks like, the repaired copy is one a provider accepts."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from talaria.messages.ids import normalise_tool_call_ids
from talaria.messages.repair import repair_history
from talaria.messages.validate import history_problems, is_blank, is_valid_call_id

Message = dict[str, Any]

IDS = st.one_of(
    st.sampled_from(["a", "b", "call_1", "call 1", "", "x" * 70, "é", "a_2", "call_0"]),
    st.integers(0, 3),
    st.none(),
)
TEXT = st.one_of(
    st.sampled_from(["", "  ", "\n", "hi", "hello world", "日本語"]), st.text(max_size=8)
)
PART = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, TEXT),
    st.just({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}),
    st.just({"type": "text"}),
    TEXT,
    st.just(5),
    st.just({"no_type": 1}),
)
CONTENT = st.one_of(st.none(), TEXT, st.lists(PART, max_size=3), st.integers(), st.just({"k": "v"}))
ARGUMENTS = st.one_of(
    st.sampled_from(['{"x": 1}', "{}", "[1]", "not json", "", '"s"', "null", '{"a": [1, {}]}']),
    st.none(),
    st.just({"x": 1}),
    st.integers(),
    st.just([1, 2]),
)
CALL = st.one_of(
    st.fixed_dictionaries(
        {
            "id": IDS,
            "type": st.sampled_from(["function", "function", "other"]),
            "function": st.fixed_dictionaries(
                {"name": st.sampled_from(["run", "run", "read", "", None]), "arguments": ARGUMENTS}
            ),
        }
    ),
    st.just("junk"),
    st.just({"id": "a"}),
)
ROLE = st.one_of(
    st.sampled_from(["system", "user", "assistant", "assistant", "tool", "tool"]),
    st.sampled_from(["function", "developer"]),
    st.none(),
    st.just(3),
)


@st.composite
def messy_message(draw: st.DrawFn) -> Message:
    message: Message = {"role": draw(ROLE)}
    if draw(st.booleans()):
        message["content"] = draw(CONTENT)
    if draw(st.integers(0, 3)) == 0 or (message["role"] == "assistant" and draw(st.booleans())):
        message["tool_calls"] = draw(st.one_of(st.lists(CALL, max_size=3), st.just("nope")))
    if message["role"] == "tool" or draw(st.integers(0, 5)) == 0:
        message["tool_call_id"] = draw(IDS)
    if draw(st.integers(0, 4)) == 0:
        message["reasoning"] = draw(TEXT)
    return message


@st.composite
def valid_history(draw: st.DrawFn) -> list[Message]:
    """A well-formed conversation: user turns, tool rounds with results in order, answers."""
    history: list[Message] = []
    if draw(st.booleans()):
        history.append({"role": "system", "content": "You are helpful."})
    serial = 0
    for turn in range(draw(st.integers(0, 4))):
        history.append({"role": "user", "content": f"question {turn}"})
        for _ in range(draw(st.integers(0, 2))):
            ids = [f"call_{serial + k}" for k in range(draw(st.integers(1, 3)))]
            serial += len(ids)
            calls = [
                {"id": i, "type": "function", "function": {"name": "run", "arguments": "{}"}}
                for i in ids
            ]
            history.append({"role": "assistant", "content": None, "tool_calls": calls})
            history.extend({"role": "tool", "tool_call_id": i, "content": f"ok {i}"} for i in ids)
        history.append({"role": "assistant", "content": f"answer {turn}"})
    return history


MUTATIONS = ("drop", "duplicate", "swap", "system", "user", "empty", "move_to_end")


@st.composite
def damaged_history(draw: st.DrawFn) -> list[Message]:
    """A valid conversation with realistic damage: lost, repeated or displaced messages."""
    history = draw(valid_history())
    for _ in range(draw(st.integers(1, 4))):
        if not history:
            break
        kind = draw(st.sampled_from(MUTATIONS))
        at = draw(st.integers(0, len(history) - 1))
        if kind == "drop":
            del history[at]
        elif kind == "duplicate":
            history.insert(at, history[at])
        elif kind == "swap" and at + 1 < len(history):
            history[at], history[at + 1] = history[at + 1], history[at]
        elif kind == "system":
            history.insert(at, {"role": "system", "content": "Be brief."})
        elif kind == "user":
            history.insert(at, {"role": "user", "content": "also this"})
        elif kind == "empty":
            history.insert(
                at, {"role": draw(st.sampled_from(["user", "assistant"])), "content": ""}
            )
        else:
            history.append(history.pop(at))
    return history


HISTORIES = st.one_of(st.lists(messy_message(), max_size=12), damaged_history())
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def well_formed_calls(messages: list[Any]) -> int:
    count = 0
    for message in messages:
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if message.get("role") != "assistant" or not isinstance(calls, list):
            continue
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            count += isinstance(function, dict) and not is_blank(function.get("name"))
    return count


@SETTINGS
@given(HISTORIES)
def test_any_history_comes_out_provider_valid(history: list[Message]) -> None:
    result = repair_history(history)
    assert history_problems(result.messages) == []
    if history_problems(history):
        assert result.repairs


@SETTINGS
@given(HISTORIES)
def test_repair_never_mutates_its_input(history: list[Message]) -> None:
    before = copy.deepcopy(history)
    repair_history(history)
    assert history == before


@SETTINGS
@given(HISTORIES)
def test_repair_is_idempotent(history: list[Message]) -> None:
    once = repair_history(history).messages
    twice = repair_history(once)
    assert twice.messages == once
    assert twice.repairs == []


@SETTINGS
@given(valid_history())
def test_valid_history_is_returned_unchanged(history: list[Message]) -> None:
    result = repair_history(history)
    assert result.repairs == []
    assert len(result.messages) == len(history)
    assert all(a is b for a, b in zip(result.messages, history, strict=True))


@SETTINGS
@given(HISTORIES)
def test_no_user_text_is_lost_and_the_latest_comes_last(history: list[Message]) -> None:
    out = repair_history(history).messages
    user_texts = [m["content"] for m in out if m["role"] == "user"]
    joined = json.dumps(user_texts, ensure_ascii=False)
    users = [m for m in history if isinstance(m, dict) and m.get("role") == "user"]
    for message in users:
        content = message.get("content")
        if isinstance(content, str) and content.strip():
            assert json.dumps(content, ensure_ascii=False)[1:-1] in joined
    last = users[-1].get("content") if users else None
    if isinstance(last, str) and last.strip():
        landed = [t for t in user_texts if isinstance(t, str) and last in t]
        assert any(t.endswith(last) for t in landed)


@SETTINGS
@given(HISTORIES)
def test_every_well_formed_tool_call_survives_with_one_result(history: list[Message]) -> None:
    out = repair_history(history).messages
    calls = [c for m in out if m["role"] == "assistant" for c in m.get("tool_calls") or ()]
    assert len(calls) == well_formed_calls(history)
    results = [m["tool_call_id"] for m in out if m["role"] == "tool"]
    assert sorted(results) == sorted(c["id"] for c in calls)


@SETTINGS
@given(st.lists(messy_message(), max_size=12))
def test_normalised_ids_are_valid_unique_and_results_follow(history: list[Message]) -> None:
    before = copy.deepcopy(history)
    out, mapping = normalise_tool_call_ids(history)
    assert history == before
    ids = [
        call["id"]
        for m in out
        if isinstance(m, dict)
        and m.get("role") == "assistant"
        and isinstance(m.get("tool_calls"), list)
        for call in m["tool_calls"]
        if isinstance(call, dict)
    ]
    assert all(is_valid_call_id(i) for i in ids)
    assert len(set(ids)) == len(ids)
    assert set(mapping) <= set(ids)
