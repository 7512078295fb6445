"""Where compression may cut: property tests over random valid histories, plus the cases a
user would run into (a long single-turn tool loop, a re-compression, a short chat)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from talaria.context.boundaries import choose_compression_window, summary_role
from talaria.context.summary import find_summary, summary_message
from talaria.messages.validate import history_problems

Message = dict[str, Any]

# A turn: (tool rounds, each with its number of parallel calls; whether a text answer ends it).
turns_strategy = st.lists(
    st.tuples(st.lists(st.integers(1, 3), max_size=3), st.booleans()), min_size=1, max_size=12
)


def build_history(turns: list[tuple[list[int], bool]], pending_user: bool) -> list[Message]:
    """A provider-valid history: user, then tool rounds, then (maybe) an answer, per turn."""
    history: list[Message] = []
    ids = iter(range(10_000))
    for number, (rounds, answered) in enumerate(turns):
        history.append({"role": "user", "content": f"request {number}"})
        for size in rounds:
            call_ids = [f"call_{next(ids)}" for _ in range(size)]
            history.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {
                                "name": "read_file",
                                "arguments": json.dumps({"path": cid}),
                            },
                        }
                        for cid in call_ids
                    ],
                }
            )
            history += [
                {"role": "tool", "tool_call_id": cid, "content": f"out {cid}"} for cid in call_ids
            ]
        if answered or not rounds:
            history.append({"role": "assistant", "content": f"answer {number}"})
    if pending_user:
        history.append({"role": "user", "content": "the latest request"})
    assert history_problems(history) == []
    return history


def splice(history: list[Message], window: tuple[int, int]) -> list[Message]:
    start, end = window
    summary = summary_message("what happened", summary_role(history, end))
    return [*history[:start], summary, *history[end:]]


def latest_user(history: list[Message]) -> int:
    return max(i for i, m in enumerate(history) if m["role"] == "user")


@settings(max_examples=300, deadline=None)
@given(
    turns_strategy,
    st.booleans(),
    st.integers(0, 3),
    st.integers(0, 8),
    st.integers(1, 2),
    st.booleans(),
)
def test_every_cut_is_safe(
    turns: list[tuple[list[int], bool]],
    pending: bool,
    head: int,
    last_n: int,
    min_size: int,
    keep_latest_user: bool,
) -> None:
    history = build_history(turns, pending)
    window = choose_compression_window(history, head, last_n, min_size, keep_latest_user)
    if window is None:
        return
    start, end = window
    assert head <= start < end <= len(history) - last_n
    assert end - start >= min_size
    # tool results are never cut away from their call
    assert history[start]["role"] != "tool"
    assert history[end]["role"] != "tool"
    # the latest user message survives (in the head or in the tail) unless allowed to go
    assert not (keep_latest_user and start <= latest_user(history) < end)
    spliced = splice(history, window)
    assert history_problems(spliced) == []
    assert spliced[:start] == history[:start]
    if last_n:
        assert spliced[-last_n:] == history[-last_n:]


@settings(max_examples=200, deadline=None)
@given(turns_strategy, st.booleans(), st.integers(0, 6))
def test_recompression_updates_the_summary_in_place(
    turns: list[tuple[list[int], bool]], pending: bool, last_n: int
) -> None:
    """Compressing twice updates the first summary (the window starts at it) unless no safe
    cut can include it."""
    history = build_history(turns, pending)
    first = choose_compression_window(history, 1, last_n)
    if first is None:
        return
    once = splice(history, first)
    index = find_summary(once)
    assert index == first[0]
    second = choose_compression_window(once, index, 0)
    if second is None:
        return
    twice = splice(once, second)
    assert history_problems(twice) == []
    summaries = sum(1 for m in twice if str(m.get("content", "")).startswith("[Context summary"))
    if second[0] == index:
        assert summaries == 1
    else:
        # no safe cut that includes the old summary is big enough: it stays in the head,
        # untouched, and a later compression whose window starts there folds both
        assert second[0] > index
        assert twice[: second[0]] == once[: second[0]]
        assert summaries == 2


def test_a_long_single_turn_tool_loop_can_be_compressed() -> None:
    """One request followed by many tool rounds (the common agent case): the latest user
    message is the first one, and the middle rounds still get summarised."""
    history = build_history([([1] * 30, False)], pending_user=False)
    window = choose_compression_window(history, 1, 6)
    assert window is not None
    start, end = window
    assert end - start > 40
    spliced = splice(history, window)
    assert spliced[0] == history[0]
    assert history_problems(spliced) == []


def test_a_chat_without_tools_keeps_the_first_request_and_summarises_as_the_assistant() -> None:
    history = build_history([([], True)] * 10, pending_user=True)
    window = choose_compression_window(history, 1, 4)
    assert window == (1, len(history) - 5)
    assert history[window[1]]["role"] == "user"
    assert summary_role(history, window[1]) == "assistant"


def test_nothing_to_compress_in_a_short_conversation() -> None:
    history = build_history([([1], True)], pending_user=True)
    assert choose_compression_window(history, 1, 20) is None
    assert choose_compression_window(history[:1], 1, 0) is None
    assert choose_compression_window([], 1, 0) is None


def test_the_latest_user_message_is_never_summarised() -> None:
    history = build_history([([], True)] * 6, pending_user=True)
    window = choose_compression_window(history, 1, 0)
    assert window is not None
    assert window[1] <= len(history) - 1
    assert splice(history, window)[-1] == {"role": "user", "content": "the latest request"}
