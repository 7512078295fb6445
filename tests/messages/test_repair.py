"""The history repair pass, the validity rules it enforces, and tool-call id normalisation."""

from __future__ import annotations

import copy
import json
import logging
import re
import sys
from typing import Any

import pytest

from talaria.messages.ids import normalise_tool_call_ids
from talaria.messages.repair import (
    EMPTY_RESULT,
    EMPTY_USER,
    MISSING_RESULT,
    RESUMED,
    USER_BOUNDARY,
    repair_history,
)
from talaria.messages.validate import history_problems

Message = dict[str, Any]


def call(call_id: Any, name: str = "run", arguments: Any = "{}") -> Message:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def asks(*calls: Message, content: Any = None) -> Message:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def result(call_id: Any, content: Any = "ok") -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def user(content: Any) -> Message:
    return {"role": "user", "content": content}


def says(content: Any) -> Message:
    return {"role": "assistant", "content": content}


SYSTEM = {"role": "system", "content": "You are helpful."}


def repaired(messages: list[Message]) -> list[Message]:
    out = repair_history(messages).messages
    assert history_problems(out) == []
    return out


def shape(messages: list[Message]) -> list[str]:
    """Roles, with the call id for tool results: enough to read an expected order at a glance."""
    return [m["role"] if m["role"] != "tool" else f"tool:{m['tool_call_id']}" for m in messages]


def valid_history() -> list[Message]:
    return [
        SYSTEM,
        user("list the files"),
        asks(call("c1", "terminal", '{"command": "ls"}'), call("c2")),
        result("c1", "a.py\nb.py"),
        result("c2"),
        says("Two files."),
        user("thanks"),
    ]


# --- validation -----------------------------------------------------------------------------


def test_a_well_formed_history_has_no_problems() -> None:
    assert history_problems(valid_history()) == []
    assert history_problems([]) == []
    assert history_problems([SYSTEM]) == []


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([user("a"), SYSTEM], "system message after the start"),
        ([{"role": "function", "content": "x"}], "unknown role"),
        ([SYSTEM, says("hi")], "first message after the system prompt"),
        ([user("a"), user("b")], "second user message in a row"),
        ([user("a"), says("b"), says("c")], "second assistant message in a row"),
        ([user("a"), asks(call("c1"))], "have no result"),
        ([user("a"), asks(call("c1")), user("b"), result("c1")], "have no result before"),
        ([user("a"), result("c1")], "does not answer a preceding tool call"),
        ([user("a"), asks(call("c1"), call("c2")), result("c2"), result("c1")], "was expected"),
        (
            [user("a"), asks(call("c1")), result("c1"), asks(call("c1")), result("c1")],
            "used twice",
        ),
        ([user("a"), asks(call("call 1")), result("call 1")], "invalid id"),
        ([user("a"), asks(call("c" * 65)), result("c" * 65)], "invalid id"),
        ([user("a"), asks(call("c1", arguments={"x": 1})), result("c1")], "not a string"),
        ([user("a"), asks(call("c1", arguments="{oops")), result("c1")], "not valid JSON"),
        ([user("a"), asks(call("c1", arguments="[1]")), result("c1")], "not a JSON object"),
        ([user("a"), asks(call("c1", name="")), result("c1")], "no function name"),
        ([user("   ")], "content is empty"),
        ([user(None)], "content is empty"),
        ([user([{"type": "text", "text": ""}, {"type": "text", "text": "x"}])], "empty text part"),
        ([user("a"), says(None)], "content is empty"),
        ([user("a"), {"role": "assistant", "content": None, "tool_calls": []}], "non-empty list"),
        ([user("a"), asks(call("c1")), result("c1", None)], "not a string"),
    ],
)
def test_each_broken_rule_is_reported_with_its_message_index(
    messages: list[Message], fragment: str
) -> None:
    problems = history_problems(messages)
    assert any(fragment in p for p in problems), problems
    assert all(re.match(r"message \d+: ", p) for p in problems)


def test_content_shapes_a_provider_accepts_are_valid() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    history = [
        user([image]),
        asks(call("c1"), content=""),
        result("c1", ""),
        says([{"type": "text", "text": "done"}]),
    ]
    assert history_problems(history) == []


# --- repair: tool results ----------------------------------------------------------------------


def test_a_lost_tool_result_becomes_an_error_result_right_after_its_call() -> None:
    out = repaired([user("go"), asks(call("c1"), call("c2")), result("c2"), user("and?")])
    assert shape(out) == ["user", "assistant", "tool:c1", "tool:c2", "user"]
    assert out[2]["content"] == MISSING_RESULT
    assert out[3]["content"] == "ok"


def test_an_orphan_result_is_dropped() -> None:
    out = repaired([user("go"), result("ghost"), says("hi")])
    assert shape(out) == ["user", "assistant"]


def test_results_are_put_back_in_call_order_and_next_to_their_call() -> None:
    history = [
        user("go"),
        asks(call("c1"), call("c2")),
        user("hurry"),
        result("c2", "two"),
        result("c1", "one"),
    ]
    out = repaired(history)
    assert shape(out) == ["user", "assistant", "tool:c1", "tool:c2", "user"]
    assert [m["content"] for m in out[2:4]] == ["one", "two"]
    assert out[4]["content"] == "hurry"


def test_a_duplicated_result_keeps_the_first() -> None:
    out = repaired([user("go"), asks(call("c1")), result("c1", "first"), result("c1", "again")])
    assert [m["content"] for m in out if m["role"] == "tool"] == ["first"]


def test_an_empty_tool_result_says_there_was_no_output() -> None:
    out = repaired([user("go"), asks(call("c1")), result("c1", ""), says("done")])
    assert out[2]["content"] == EMPTY_RESULT


def test_list_tool_content_is_flattened_to_text() -> None:
    parts = [{"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"}]
    out = repaired([user("go"), asks(call("c1")), result("c1", parts)])
    assert out[2]["content"] == "line 1\nline 2"


# --- repair: arguments and ids ------------------------------------------------------------------


def test_dict_arguments_are_json_encoded_and_bad_ones_become_an_empty_object() -> None:
    history = [
        user("go"),
        asks(call("c1", arguments={"path": "a.py"}), call("c2", arguments="{not json")),
        result("c1"),
        result("c2"),
    ]
    result_ = repair_history(history)
    calls = result_.messages[1]["tool_calls"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"path": "a.py"}
    assert calls[1]["function"]["arguments"] == "{}"
    assert any("not valid JSON" in r for r in result_.repairs)


def test_a_call_without_a_function_name_is_dropped_with_its_result() -> None:
    out = repaired([user("go"), asks(call("c1", name=""), content="let me see"), result("c1")])
    assert shape(out) == ["user", "assistant"]
    assert "tool_calls" not in out[1]
    assert out[1]["content"] == "let me see"


def test_ids_reused_every_turn_are_made_unique_and_results_follow_their_own_turn() -> None:
    history = [
        user("go"),
        asks(call("call_0")),
        result("call_0", "first"),
        asks(call("call_0")),
        result("call_0", "second"),
        says("done"),
    ]
    out = repaired(history)
    first, second = out[1]["tool_calls"][0]["id"], out[3]["tool_calls"][0]["id"]
    assert first != second
    assert (out[2]["tool_call_id"], out[2]["content"]) == (first, "first")
    assert (out[4]["tool_call_id"], out[4]["content"]) == (second, "second")


def test_ids_a_provider_would_reject_are_renamed_consistently() -> None:
    bad = "toolu 01/ü" + "x" * 80
    out = repaired([user("go"), asks(call(bad)), result(bad, "done")])
    new_id = out[1]["tool_calls"][0]["id"]
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", new_id)
    assert out[2]["tool_call_id"] == new_id
    assert out[2]["content"] == "done"


def test_missing_ids_get_the_same_name_on_every_repair() -> None:
    """The request prefix must not change between calls, or the prompt cache is lost."""
    history = [user("go"), asks(call(None)), says("done")]
    first = repair_history(history).messages
    second = repair_history(history).messages
    assert first == second
    assert first[1]["tool_calls"][0]["id"] == first[2]["tool_call_id"]


def test_normalising_leaves_valid_ids_and_their_messages_alone() -> None:
    history = valid_history()
    out, mapping = normalise_tool_call_ids(history)
    assert mapping == {}
    assert all(a is b for a, b in zip(out, history, strict=True))


def test_normalising_avoids_ids_already_taken_and_reports_the_mapping() -> None:
    history = [
        user("go"),
        asks(call("call 1"), call("call_1")),
        result("call 1", "spaced"),
        result("call_1", "plain"),
    ]
    out, mapping = normalise_tool_call_ids(history)
    ids = [c["id"] for c in out[1]["tool_calls"]]
    assert ids[1] == "call_1"
    assert ids[0] not in ("call_1", "call 1")
    assert mapping == {ids[0]: "call 1"}
    assert [(m["tool_call_id"], m["content"]) for m in out[2:]] == [
        (ids[0], "spaced"),
        ("call_1", "plain"),
    ]


def test_a_repeated_id_inside_one_message_pairs_results_in_order() -> None:
    history = [user("go"), asks(call("x"), call("x")), result("x", "one"), result("x", "two")]
    out, _ = normalise_tool_call_ids(history)
    ids = [c["id"] for c in out[1]["tool_calls"]]
    assert len(set(ids)) == 2
    assert [m["tool_call_id"] for m in out[2:]] == ids


# --- repair: turns ---------------------------------------------------------------------------


def test_consecutive_user_messages_merge_with_a_visible_boundary() -> None:
    out = repaired([user("first"), user("second"), user("latest")])
    assert out == [user(f"first{USER_BOUNDARY}second{USER_BOUNDARY}latest")]


def test_consecutive_assistant_messages_merge_and_keep_their_calls_answered() -> None:
    history = [
        user("go"),
        says("Let me look."),
        {**asks(call("c1"), content="Reading."), "reasoning": "need the file"},
        result("c1"),
    ]
    out = repaired(history)
    assert shape(out) == ["user", "assistant", "tool:c1"]
    assert out[1]["content"] == "Let me look.\n\nReading."
    assert out[1]["tool_calls"][0]["id"] == "c1"
    assert out[1]["reasoning"] == "need the file"


def test_list_contents_are_concatenated_when_merged() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    out = repaired([user([image]), user("what is this?")])
    assert out[0]["content"] == [image, {"type": "text", "text": "what is this?"}]


def test_a_later_system_message_becomes_a_note_before_the_users_words() -> None:
    history = [SYSTEM, user("hi"), says("hello"), {"role": "system", "content": "Be brief."}]
    history.append(user("what now?"))
    out = repaired(history)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[3]["content"] == f"[System note] Be brief.{USER_BOUNDARY}what now?"


def test_a_system_note_with_no_user_turn_next_stands_as_its_own_user_message() -> None:
    history = [user("hi"), says("hello"), {"role": "system", "content": "Wrap up."}, says("ok")]
    out = repaired(history)
    assert [m["role"] for m in out] == ["user", "assistant", "user", "assistant"]
    assert out[2]["content"] == "[System note] Wrap up."


def test_empty_messages_are_dropped_but_the_last_user_message_is_kept() -> None:
    history = [user("  "), says(""), user("real question"), says("answer"), user("")]
    out = repaired(history)
    assert out == [user("real question"), says("answer"), user(EMPTY_USER)]


def test_empty_text_parts_are_removed() -> None:
    history = [user([{"type": "text", "text": " "}, {"type": "text", "text": "hi"}])]
    assert repaired(history) == [user([{"type": "text", "text": "hi"}])]


def test_a_history_that_starts_with_the_assistant_gets_a_resume_marker() -> None:
    out = repaired([SYSTEM, says("Where were we?"), user("here")])
    assert out[:3] == [SYSTEM, user(RESUMED), says("Where were we?")]


def test_a_history_that_starts_with_tool_results_loses_the_orphans() -> None:
    out = repaired([result("c1"), asks(call("c2")), result("c2")])
    assert shape(out) == ["user", "assistant", "tool:c2"]
    assert out[0]["content"] == RESUMED


# --- repair: purity, logging, speed ------------------------------------------------------------


def test_a_valid_history_comes_back_as_the_same_objects_with_nothing_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = valid_history()
    with caplog.at_level(logging.INFO, logger="talaria.repair"):
        result_ = repair_history(history)
    assert result_.repairs == []
    assert result_.messages is not history
    assert all(a is b for a, b in zip(result_.messages, history, strict=True))
    assert caplog.records == []


def test_each_repair_is_logged_and_the_input_is_left_untouched(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = [user("go"), asks(call("c1", arguments={"x": 1})), user("b"), user("c")]
    before = copy.deepcopy(history)
    with caplog.at_level(logging.INFO, logger="talaria.repair"):
        result_ = repair_history(history)
    assert history == before
    assert len(result_.repairs) >= 3
    logged = [r.getMessage() for r in caplog.records if r.name == "talaria.repair"]
    assert len(logged) == len(result_.repairs)
    assert all(any(fix in line for line in logged) for fix in result_.repairs)


def test_messages_that_need_no_fix_are_shared_not_copied() -> None:
    history = valid_history()
    del history[4]  # lose the result of c2
    out = repaired(history)
    assert out[0] is history[0] and out[1] is history[1] and out[2] is history[2]
    assert out[3] is history[3]
    assert out[5] is history[4] and out[6] is history[5]


def long_history(messages: int) -> list[Message]:
    history: list[Message] = [SYSTEM]
    serial = 0
    while len(history) < messages:
        history.append(user("please read the next file " * 5))
        for _ in range(3):
            ids = [f"call_{serial}", f"call_{serial + 1}"]
            serial += 2
            arguments = json.dumps({"path": f"src/{serial}.py", "limit": 200})
            history.append(asks(*(call(i, "read_file", arguments) for i in ids)))
            history.extend(result(i, "line\n" * 50) for i in ids)
        history.append(says("done " * 20))
    return history


def _calls_to_repair(history: list[dict[str, Any]]) -> int:
    """How many Python and C function calls one repair of `history` makes: its work, counted."""
    counted = [0]

    def count(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            counted[0] += 1

    sys.setprofile(count)
    try:
        out = repair_history(history)
    finally:
        sys.setprofile(None)
    assert out.repairs == []
    return counted[0]


def test_repairing_a_long_valid_history_costs_the_same_per_message() -> None:
    short, long = long_history(1000), long_history(5000)
    assert history_problems(long) == []
    per_short = _calls_to_repair(short) / len(short)
    per_long = _calls_to_repair(long) / len(long)
    assert per_long < per_short * 1.2, (per_short, per_long)
