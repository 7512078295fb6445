"""A test kit every `SessionStore` backend must pass.

Subclass `StoreConformance` in a test module and provide a `store` fixture that yields a fresh,
empty store; pytest then runs every check below against that backend::

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def store(self, tmp_path):
            with MyStore(tmp_path / "db") as s:
                yield s
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from talaria.core import tool_calls_of
from talaria.store.base import (
    AmbiguousSession,
    SearchQueryError,
    SessionBusy,
    SessionExists,
    SessionNotFound,
    SessionStore,
    StoreError,
    TitleInUse,
    UsageRecord,
    new_writer_id,
)

AWKWARD_QUERIES = (
    "c++",
    "foo-bar",
    '"unbalanced',
    "path/to/file.py",
    "*",
    "AND",
    "NOT",
    "OR",
    "a AND",
    "NOT deploy",
    "deploy NOT",
    '""',
    "",
    "   ",
    "(",
    ")",
    "col:val",
    "^start",
    "NEAR(a b)",
    "x*",
    "-",
    "'; DROP TABLE messages; --",
    "\x00",
    "emoji 🚀",
    "ünïcödé",
    '"a" "b',
    "{}",
)

USAGE = {
    "input_tokens": 1200,
    "output_tokens": 340,
    "cache_read_tokens": 5000,
    "cache_write_tokens": 64,
    "reasoning_tokens": 100,
}

TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "read_file", "arguments": '{"path": "src/app/main.py"}'},
}

SHAPES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Fix the bug in main.py"},
    {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
    {"role": "tool", "tool_call_id": "call_1", "name": "read_file", "content": "print('hi')"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is in this picture?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    },
    {
        "role": "assistant",
        "content": "A cat.",
        "reasoning": "The image shows whiskers.",
        "reasoning_details": {
            "source": "anthropic_messages|https://api.anthropic.com",
            "items": [{"type": "thinking", "signature": "abc"}],
        },
    },
    {"role": "user", "content": "[1, 2, 3]"},
    {"role": "user", "content": ""},
    {"role": "assistant", "content": "ok", "finish_reason": None, "x_meta": {"n": [1, 2]}},
    {"role": "assistant", "content": "unicode ✓ 日本語 \u200b"},
]


class StoreConformance:
    """Behaviour the loop, the CLI and the agent tools rely on, whatever the backend."""

    # -- messages -----------------------------------------------------------------------

    def test_every_message_shape_round_trips_exactly(self, store: SessionStore) -> None:
        store.create_session("s1")
        store.append_messages("s1", list(enumerate(SHAPES)))
        assert store.load_messages("s1") == SHAPES
        assert store.message_count("s1") == len(SHAPES)

    def test_messages_load_in_seq_order(self, store: SessionStore) -> None:
        store.create_session("s1")
        store.append_messages("s1", [(2, {"role": "user", "content": "c"})])
        store.append_messages(
            "s1",
            [(0, {"role": "user", "content": "a"}), (1, {"role": "assistant", "content": "b"})],
        )
        assert [m["content"] for m in store.load_messages("s1")] == ["a", "b", "c"]

    def test_reappending_a_seq_is_a_no_op(self, store: SessionStore) -> None:
        store.create_session("s1")
        first = [
            (0, {"role": "user", "content": "hi"}),
            (1, {"role": "assistant", "content": "yo"}),
        ]
        store.append_messages("s1", first)
        store.append_messages(
            "s1",
            [
                (1, {"role": "assistant", "content": "CHANGED"}),
                (2, {"role": "user", "content": "next"}),
            ],
        )
        assert [m["content"] for m in store.load_messages("s1")] == ["hi", "yo", "next"]
        assert store.message_count("s1") == 3
        assert store.get_session("s1").message_count == 3  # type: ignore[union-attr]

    def test_truncating_drops_the_tail_from_history_count_and_search(
        self, store: SessionStore
    ) -> None:
        store.create_session("s1")
        words = ["alpha", "bravo", "charlie", "delta"]
        store.append_messages(
            "s1", [(seq, {"role": "user", "content": word}) for seq, word in enumerate(words)]
        )
        assert store.truncate_messages("s1", 2) == 2
        assert [m["content"] for m in store.load_messages("s1")] == ["alpha", "bravo"]
        assert store.message_count("s1") == 2
        assert store.search("charlie") == []
        assert store.truncate_messages("s1", 5) == 0
        store.append_messages("s1", [(2, {"role": "user", "content": "echo"})])
        assert [m["content"] for m in store.load_messages("s1")][-1] == "echo"
        with pytest.raises(SessionNotFound):
            store.truncate_messages("missing", 0)

    def test_a_step_is_appended_whole_or_not_at_all(self, store: SessionStore) -> None:
        """The loop appends a step (the assistant message and its tool results) in one call:
        it is one transaction, so a refused step leaves no part of itself behind."""
        store.create_session("s1")
        owner, other = new_writer_id(), new_writer_id()
        store.append_messages("s1", [(0, {"role": "user", "content": "go"})], writer=owner)
        step: list[tuple[int, dict[str, Any]]] = [
            (1, {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}),
            (2, {"role": "tool", "tool_call_id": "call_1", "content": "print('hi')"}),
        ]
        with pytest.raises(StoreError):
            store.append_messages("s1", [*step, (-3, {"role": "user", "content": "bad seq"})])
        with pytest.raises(SessionBusy):
            store.append_messages("s1", step, writer=other)
        assert store.message_count("s1") == 1 and len(store.load_messages("s1")) == 1
        store.append_messages("s1", step, writer=owner)
        assert [m["role"] for m in store.load_messages("s1")] == ["user", "assistant", "tool"]
        assert store.message_count("s1") == 3

    def test_append_to_unknown_session_is_refused(self, store: SessionStore) -> None:
        with pytest.raises(SessionNotFound):
            store.append_messages("nope", [(0, {"role": "user", "content": "x"})])
        with pytest.raises(SessionNotFound):
            store.load_messages("nope")

    # -- sessions -----------------------------------------------------------------------

    def test_session_metadata_round_trips(self, store: SessionStore) -> None:
        store.create_session(
            "s1",
            source="cli",
            model="gpt-4.1",
            provider="openai",
            api_mode="chat_completions",
            system_prompt="SYS",
            title="First",
            cwd="/tmp/project",
        )
        info = store.get_session("s1")
        assert info is not None
        assert (info.source, info.model, info.provider, info.api_mode) == (
            "cli",
            "gpt-4.1",
            "openai",
            "chat_completions",
        )
        assert (info.system_prompt, info.title, info.cwd) == ("SYS", "First", "/tmp/project")
        assert info.ended_at is None and info.created_at > 0
        assert store.get_session("missing") is None

    def test_duplicate_session_id_is_refused(self, store: SessionStore) -> None:
        store.create_session("s1")
        with pytest.raises(SessionExists):
            store.create_session("s1")

    def test_update_session_changes_only_given_fields(self, store: SessionStore) -> None:
        store.create_session("s1", model="m1", provider="p1")
        store.update_session("s1", model="m2", end_reason="text_response", ended=True)
        info = store.get_session("s1")
        assert info is not None
        assert (info.model, info.provider, info.end_reason) == ("m2", "p1", "text_response")
        assert info.ended_at is not None
        with pytest.raises(SessionNotFound):
            store.update_session("missing", model="x")

    def test_usage_totals_round_trip_and_survive_other_updates(self, store: SessionStore) -> None:
        store.create_session("s1")
        assert store.get_session("s1").usage == {}  # type: ignore[union-attr]
        totals = {"input_tokens": 100, "output_tokens": 20, "estimated_cost_usd": 0.5}
        store.update_session("s1", usage=totals)
        store.update_session("s1", model="m2", ended=True)
        assert store.get_session("s1").usage == totals  # type: ignore[union-attr]
        store.update_session("s1", usage={**totals, "input_tokens": 150})
        assert store.get_session("s1").usage["input_tokens"] == 150  # type: ignore[union-attr]

    def test_titles_are_unique(self, store: SessionStore) -> None:
        store.create_session("s1", title="deploy fix")
        store.create_session("s2")
        with pytest.raises(TitleInUse, match="s1"):
            store.create_session("s3", title="deploy fix")
        with pytest.raises(TitleInUse):
            store.rename("s2", "deploy fix")
        with pytest.raises(TitleInUse):
            store.update_session("s2", title="deploy fix")
        store.rename("s1", "deploy fix")  # renaming to its own title is fine
        store.rename("s1", None)
        store.rename("s2", "deploy fix")
        assert store.resolve("deploy fix") == "s2"

    def test_lineage_links_child_to_parent(self, store: SessionStore) -> None:
        store.create_session("parent-session")
        store.create_session("child-session", parent_session_id="parent-session")
        child = store.get_session("child-session")
        assert child is not None and child.parent_session_id == "parent-session"
        with pytest.raises(SessionNotFound):
            store.create_session("orphan", parent_session_id="no-such-parent")
        store.delete_session("parent-session")
        child = store.get_session("child-session")
        assert child is not None and child.parent_session_id is None

    def test_a_fork_copies_the_session_in_one_operation(self, store: SessionStore) -> None:
        store.create_session("src-session", source="cli", model="m", provider="p",
                             api_mode="chat_completions", system_prompt="be brief",
                             cwd="/w", title="original")  # fmt: skip
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "zebra plan"},
            {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        ]
        store.append_messages("src-session", list(enumerate(messages)))
        store.fork_session("src-session", "fork-session", title="copy")
        fork, source = store.get_session("fork-session"), store.get_session("src-session")
        assert fork is not None and source is not None
        kept = ("source", "model", "provider", "api_mode", "system_prompt", "cwd")
        assert [getattr(fork, k) for k in kept] == [getattr(source, k) for k in kept]
        assert (fork.title, fork.message_count) == ("copy", 3)
        assert store.load_messages("fork-session") == messages
        assert store.get_state("fork-session", "forked_from") == "src-session"
        assert {hit.session_id for hit in store.search("zebra")} == {"src-session", "fork-session"}
        store.append_messages("fork-session", [(3, {"role": "user", "content": "only here"})])
        assert store.message_count("src-session") == 3

    def test_a_failed_fork_leaves_no_session(self, store: SessionStore) -> None:
        store.create_session("src-session", title="taken")
        store.append_messages("src-session", [(0, {"role": "user", "content": "hi"})])
        with pytest.raises(TitleInUse):
            store.fork_session("src-session", "fork-session", title="taken")
        with pytest.raises(SessionExists):
            store.fork_session("src-session", "src-session")
        with pytest.raises(SessionNotFound):
            store.fork_session("no-such-session", "fork-session")
        assert store.get_session("fork-session") is None
        assert [info.id for info in store.list_sessions()] == ["src-session"]
        assert store.message_count("src-session") == 1

    def test_delete_removes_messages_state_and_search_hits(self, store: SessionStore) -> None:
        store.create_session("s1")
        store.append_messages("s1", [(0, {"role": "user", "content": "zebra migration"})])
        store.set_state("s1", "todos", [1])
        store.delete_session("s1")
        assert store.get_session("s1") is None
        assert store.search("zebra") == []
        with pytest.raises(SessionNotFound):
            store.delete_session("s1")

    def test_list_and_recent_order_by_activity(self, store: SessionStore) -> None:
        for sid, source in (("a-session", "cli"), ("b-session", "api"), ("c-session", "cli")):
            folder = "/p/two" if sid == "b-session" else "/p/one"
            store.create_session(sid, source=source, cwd=folder)
            time.sleep(0.002)
        store.append_messages("a-session", [(0, {"role": "user", "content": "hello there"})])
        assert [s.id for s in store.list_sessions()] == ["a-session", "c-session", "b-session"]
        assert [s.id for s in store.list_sessions(limit=1, offset=1)] == ["c-session"]
        assert [s.id for s in store.list_sessions(source="cli")] == ["a-session", "c-session"]
        assert [s.id for s in store.list_sessions(cwd="/p/one")] == ["a-session", "c-session"]
        assert [s.id for s in store.list_sessions(source="api", cwd="/p/two")] == ["b-session"]
        assert store.list_sessions(source="cli", cwd="/p/two") == []
        recent = store.recent(5)
        assert [s.id for s in recent] == ["a-session"]  # sessions with no messages are skipped
        assert recent[0].preview == "hello there"

    # -- resolve ------------------------------------------------------------------------

    def test_resolve_by_id_prefix_title_and_latest(self, store: SessionStore) -> None:
        store.create_session("20240501_abcdef12", title="refactor store")
        time.sleep(0.002)
        store.create_session("20240502_99887766")
        assert store.resolve("20240501_abcdef12") == "20240501_abcdef12"
        assert store.resolve("20240501") == "20240501_abcdef12"
        assert store.resolve("refactor store") == "20240501_abcdef12"
        assert store.resolve("latest") == "20240502_99887766"
        store.append_messages("20240501_abcdef12", [(0, {"role": "user", "content": "x"})])
        assert store.resolve("latest") == "20240501_abcdef12"

    def test_resolve_matches_a_title_in_any_case_when_only_one_does(
        self, store: SessionStore
    ) -> None:
        store.create_session("20240501_abcdef12", title="Refactor Store")
        assert store.resolve("refactor store") == "20240501_abcdef12"
        store.create_session("20240502_99887766", title="refactor STORE")
        assert store.resolve("refactor STORE") == "20240502_99887766"  # the exact one first
        with pytest.raises(AmbiguousSession) as excinfo:
            store.resolve("REFACTOR store")
        assert sorted(excinfo.value.candidates) == ["20240501_abcdef12", "20240502_99887766"]

    def test_resolve_reports_missing_and_ambiguous(self, store: SessionStore) -> None:
        with pytest.raises(SessionNotFound):
            store.resolve("latest")
        store.create_session("20240501_aaaa")
        store.create_session("20240501_bbbb")
        with pytest.raises(AmbiguousSession) as excinfo:
            store.resolve("202405")
        assert sorted(excinfo.value.candidates) == ["20240501_aaaa", "20240501_bbbb"]
        assert "20240501_aaaa" in str(excinfo.value)
        with pytest.raises(SessionNotFound):
            store.resolve("20240501_c")
        with pytest.raises(SessionNotFound):
            store.resolve("2024")  # prefixes shorter than 6 characters are not guesses

    # -- search -------------------------------------------------------------------------

    def _seed_search(self, store: SessionStore) -> None:
        store.create_session("s-one", title="build")
        store.append_messages(
            "s-one",
            [
                (0, {"role": "user", "content": "the c++ build fails with foo-bar linker errors"}),
                (1, {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}),
                (2, {"role": "tool", "tool_call_id": "call_1", "content": "int main() {}"}),
                (3, {"role": "assistant", "content": "fixed the kangaroo include"}),
            ],
        )
        store.create_session("s-two")
        store.append_messages("s-two", [(0, {"role": "user", "content": "kangaroo facts"})])

    def test_search_finds_text_and_tool_arguments(self, store: SessionStore) -> None:
        self._seed_search(store)
        hits = store.search("linker")
        assert [(h.session_id, h.message_seq, h.role) for h in hits] == [("s-one", 0, "user")]
        assert "linker" in hits[0].snippet and hits[0].session_title == "build"
        assert [h.message_seq for h in store.search("src/app/main.py")] == [1]

    def test_search_hits_carry_surrounding_messages(self, store: SessionStore) -> None:
        self._seed_search(store)
        (hit,) = store.search("main.py")
        assert [m["role"] for m in hit.context] == ["user", "assistant", "tool"]
        assert tool_calls_of(hit.context[1]) == [TOOL_CALL]

    def test_search_excludes_a_session(self, store: SessionStore) -> None:
        self._seed_search(store)
        assert {h.session_id for h in store.search("kangaroo")} == {"s-one", "s-two"}
        assert [h.session_id for h in store.search("kangaroo", exclude_session="s-one")] == [
            "s-two"
        ]
        assert len(store.search("kangaroo", limit=1)) == 1

    def test_search_handles_punctuation_as_text(self, store: SessionStore) -> None:
        self._seed_search(store)
        assert [h.message_seq for h in store.search("c++")] == [0]
        assert [h.message_seq for h in store.search("foo-bar")] == [0]
        assert [h.message_seq for h in store.search('"unbalanced linker')] == []
        assert [h.message_seq for h in store.search("kanga*", exclude_session="s-two")] == [3]
        assert [h.session_id for h in store.search("kangaroo NOT include")] == ["s-two"]

    @pytest.mark.parametrize("query", AWKWARD_QUERIES)
    def test_awkward_queries_give_results_or_a_clear_error(
        self, store: SessionStore, query: str
    ) -> None:
        self._seed_search(store)
        try:
            hits = store.search(query)
        except SearchQueryError as exc:
            assert str(exc)
        else:
            assert isinstance(hits, list)

    def test_empty_query_is_a_clear_error(self, store: SessionStore) -> None:
        for query in ("", "   ", "*", "-- ++"):
            with pytest.raises(SearchQueryError, match="no words"):
                store.search(query)

    # -- state --------------------------------------------------------------------------

    def test_state_round_trips_json_values(self, store: SessionStore) -> None:
        store.create_session("s1")
        assert store.get_state("s1", "todos") is None
        todos = [{"id": "1", "content": "write tests", "status": "pending"}]
        store.set_state("s1", "todos", todos)
        assert store.get_state("s1", "todos") == todos
        store.set_state("s1", "todos", [])
        assert store.get_state("s1", "todos") == []
        store.set_state("s1", "flags", {"a": True, "n": None})
        assert store.get_state("s1", "flags") == {"a": True, "n": None}
        with pytest.raises(SessionNotFound):
            store.set_state("missing", "todos", [])

    # -- one writer per session ---------------------------------------------------------

    def test_a_second_writer_is_refused_while_the_first_holds_the_lease(
        self, store: SessionStore
    ) -> None:
        store.create_session("s1")
        first, second = new_writer_id(), new_writer_id()
        store.claim_writer("s1", first)
        store.claim_writer("s1", first)  # re-claiming renews
        with pytest.raises(SessionBusy, match="session busy"):
            store.claim_writer("s1", second)
        with pytest.raises(SessionBusy, match="session busy"):
            store.append_messages("s1", [(0, {"role": "user", "content": "x"})], writer=second)
        assert store.load_messages("s1") == []
        store.append_messages("s1", [(0, {"role": "user", "content": "hi"})], writer=first)
        store.release_writer("s1", second)  # not the holder: no effect
        with pytest.raises(SessionBusy):
            store.claim_writer("s1", second)
        store.release_writer("s1", first)
        store.claim_writer("s1", second)
        store.append_messages("s1", [(1, {"role": "assistant", "content": "yo"})], writer=second)
        assert [m["content"] for m in store.load_messages("s1")] == ["hi", "yo"]

    def test_an_expired_lease_or_a_dead_owner_is_taken_over(self, store: SessionStore) -> None:
        store.create_session("s1")
        store.create_session("s2")
        store.claim_writer("s1", new_writer_id(), ttl=0.0)
        store.claim_writer("s1", new_writer_id())
        host = new_writer_id().split(":")[0]
        store.claim_writer("s2", f"{host}:999999999:dead")  # no such process on this host
        store.claim_writer("s2", new_writer_id())

    def test_writers_of_different_sessions_do_not_interfere(self, store: SessionStore) -> None:
        store.create_session("s1")
        store.create_session("s2")
        store.claim_writer("s1", new_writer_id())
        store.claim_writer("s2", new_writer_id())
        store.append_messages("s2", [(0, {"role": "user", "content": "ok"})])
        assert store.message_count("s2") == 1

    # -- usage records ------------------------------------------------------------------

    def test_usage_records_round_trip_in_time_order(self, store: SessionStore) -> None:
        store.create_session("s1")
        store.create_session("s2")
        first = UsageRecord("s1", "gpt-4.1", "openai", 3, {**USAGE, "estimated_cost_usd": 0.25})
        unpriced = UsageRecord("s2", "local", "custom", 1, {**USAGE, "estimated_cost_usd": None})
        store.record_usage("s1", [first])
        store.record_usage("s2", [unpriced])
        records = store.usage_records()
        assert [(r.session_id, r.model, r.provider, r.calls) for r in records] == [
            ("s1", "gpt-4.1", "openai", 3),
            ("s2", "local", "custom", 1),
        ]
        assert records[0].usage == {**USAGE, "estimated_cost_usd": 0.25}
        assert records[1].usage["estimated_cost_usd"] is None  # unknown stays unknown, not $0
        assert records[0].created_at <= records[1].created_at
        assert [r.session_id for r in store.usage_records(session_id="s2")] == ["s2"]
        assert store.usage_records(since=records[1].created_at + 3600) == []
        assert len(store.usage_records(since=records[0].created_at)) == 2

    def test_usage_records_need_a_session_and_go_with_it(self, store: SessionStore) -> None:
        with pytest.raises(SessionNotFound):
            store.record_usage("nope", [UsageRecord("nope", "m", "p", 1, USAGE)])
        store.create_session("s1")
        store.record_usage("s1", [UsageRecord("s1", "m", "p", 1, USAGE)])
        store.delete_session("s1")
        assert store.usage_records() == []
