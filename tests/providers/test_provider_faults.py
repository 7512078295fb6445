"""Fault injection against the real SDKs, in all three API modes: every failure a provider can
produce ends in an answer, a fallback answer, or a failed result that names the cause.

Each case also pins the number of requests each server received (one retry layer, no hidden
SDK retries) and that no request broke the wire's history rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from helpers import MODES, base_url, scripted_agent
from talaria.events import Event, Notice
from talaria.testing.script import (
    Drop,
    Fail,
    Malformed,
    Reply,
    ScriptedCall,
    Stall,
    Step,
    call,
    text,
)
from talaria.testing.server import ScriptedProvider

FAST = {
    "context.engine": "none",
    "retry.base_delay": 0.01,
    "retry.max_delay": 2.0,
    "model.first_byte_timeout": 5.0,
    "model.stream_idle_timeout": 0.5,
}

STREAMED = "Several words that stream out in small pieces before the failure."


@dataclass
class Case:
    name: str
    primary: list[Step]
    answer: str | None = None
    """The expected final answer; None when the turn must fail."""
    exit_reason: str = "text_response"
    error_has: str = ""
    requests: int = 1
    backup: list[Step] | None = None
    """Steps for a fallback provider (None: no fallback configured)."""
    backup_requests: int = 0
    config: dict[str, Any] = field(default_factory=dict)
    notice_has: str = ""


def fails(status: int, times: int, **kwargs: Any) -> list[Step]:
    return [Fail(status, **kwargs) for _ in range(times)]


CASES = [
    Case("429 retried", [Fail(429), text("ok")], "ok", requests=2),
    Case(
        "429 exhausted falls back",
        fails(429, 3),
        "from backup",
        requests=3,
        backup=[text("from backup")],
        backup_requests=1,
    ),
    Case("429 exhausted fails", fails(429, 3), None, "failed:rate_limit", "rate_limit", requests=3),
    Case(
        "429 asking too long a wait falls back at once",
        [Fail(429, headers={"Retry-After": "120"})],
        "from backup",
        requests=1,
        backup=[text("from backup")],
        backup_requests=1,
    ),
    Case("500 retried", [Fail(500), text("ok")], "ok", requests=2),
    Case("502 retried", [Fail(502), text("ok")], "ok", requests=2),
    Case("503 retried", [Fail(503), text("ok")], "ok", requests=2),
    Case("529 retried", [Fail(529), text("ok")], "ok", requests=2),
    Case(
        "5xx exhausted falls back",
        [Fail(500), Fail(503), Fail(529)],
        "from backup",
        requests=3,
        backup=[text("from backup")],
        backup_requests=1,
    ),
    Case(
        "one attempt means one request",
        fails(500, 1),
        None,
        "failed:server_error",
        "server_error",
        requests=1,
        config={"retry.max_attempts": 1},
    ),
    Case(
        "401 refreshed",
        [Fail(401), text("ok")],
        "ok",
        requests=2,
        config={"model.api_key_refresh": lambda: "fresh-key"},
    ),
    Case(
        "401 falls back",
        [Fail(401)],
        "from backup",
        requests=1,
        backup=[text("from backup")],
        backup_requests=1,
    ),
    Case(
        "403 refreshed once then falls back",
        fails(403, 2),
        "from backup",
        requests=2,
        backup=[text("from backup")],
        backup_requests=1,
        config={"model.api_key_refresh": lambda: "fresh-key"},
    ),
    Case("401 fails", [Fail(401)], None, "failed:auth", "auth", requests=1),
    Case(
        "reset before the stream",
        [Drop(Reply(text="lost"), after_chunks=0), text("ok")],
        "ok",
        requests=2,
    ),
    Case(
        "reset mid-stream",
        [Drop(Reply(text=STREAMED, chunk_size=4), after_chunks=6), text("ok")],
        "ok",
        requests=2,
        notice_has="discarded",
    ),
    Case(
        "stream ends cleanly mid-answer (a proxy's timeout)",
        [Drop(Reply(text=STREAMED, chunk_size=4), after_chunks=6, clean=True), text("ok")],
        "ok",
        requests=2,
        notice_has="discarded",
    ),
    Case(
        "stream ends cleanly before a word",
        [Drop(Reply(text="lost"), after_chunks=1, clean=True), text("ok")],
        "ok",
        requests=2,
    ),
    Case(
        "stalled stream",
        [Stall(Reply(text=STREAMED, chunk_size=4), after_chunks=6, seconds=10), text("ok")],
        "ok",
        requests=2,
        notice_has="discarded",
    ),
    Case(
        "no first byte",
        [Stall(Reply(text="late"), after_chunks=0, seconds=10), text("ok")],
        "ok",
        requests=2,
        config={"model.first_byte_timeout": 0.5},
    ),
    Case(
        "stalls exhausted fail",
        [Stall(Reply(text="x"), after_chunks=0, seconds=10)] * 2,
        None,
        "failed:timeout",
        "first_byte_timeout",
        requests=2,
        config={"model.first_byte_timeout": 0.5, "retry.max_attempts": 2},
    ),
    Case("malformed body retried", [Malformed(), text("ok")], "ok", requests=2),
    Case(
        "malformed bodies fall back",
        [Malformed(), Malformed("[]"), Malformed("")],
        "from backup",
        requests=3,
        backup=[text("from backup")],
        backup_requests=1,
    ),
    Case("empty reply nudged", [Reply(), text("ok")], "ok", requests=2),
    Case(
        "empty twice falls back",
        [Reply(), Reply()],
        "from backup",
        requests=2,
        backup=[text("from backup")],
        backup_requests=1,
    ),
    Case(
        "empty everywhere fails",
        [Reply(), Reply()],
        None,
        "failed:empty_response",
        "empty",
        requests=2,
    ),
    Case(
        "reasoning only continued",
        [Reply(reasoning="Let me think about it."), text("ok")],
        "ok",
        requests=2,
    ),
    Case(
        "cut-off text continued",
        [Reply(text="The first half, ", finish_reason="length"), text("and the rest.")],
        "The first half, and the rest.",
        requests=2,
    ),
    Case(
        "truncated arguments never run",
        [
            Reply(tool_calls=[ScriptedCall("add", '{"a": 1, "b"')], finish_reason="length"),
            call("add", {"a": 1, "b": 2}),
            text("3"),
        ],
        "3",
        requests=3,
    ),
    Case(
        "refusal fails at once",
        [Reply(refusal="I can't help with that.")],
        None,
        "failed:refusal",
        "I can't help with that.",
        requests=1,
        backup=[text("unused")],
        backup_requests=0,
    ),
    Case(
        "bad request fails at once",
        [Fail(400, message="unknown parameter: foo")],
        None,
        "failed:bad_request",
        "unknown parameter",
        requests=1,
        backup=[text("unused")],
        backup_requests=0,
    ),
]


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def servers() -> Iterator[tuple[ScriptedProvider, ScriptedProvider]]:
    with ScriptedProvider() as primary, ScriptedProvider(model="backup-model") as backup:
        yield primary, backup


def run_case(
    case: Case, mode: str, servers: tuple[ScriptedProvider, ScriptedProvider], home: Path
) -> tuple[dict[str, Any], list[Event]]:
    primary, backup = servers
    primary.add(*case.primary)
    fallbacks = []
    if case.backup is not None:
        backup.add(*case.backup)
        fallbacks = [
            {
                "model": "backup-model",
                "base_url": base_url(backup, mode),
                "api_key": "backup-key",
                "api_mode": mode,
            }
        ]
    events: list[Event] = []
    with scripted_agent(
        primary,
        home,
        mode,
        fallback_providers=fallbacks,
        config={**FAST, **case.config},
        event_callback=events.append,
    ) as agent:
        result = agent.run_conversation(user_message="hello")
    return result, events


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_fault(
    case: Case,
    mode: str,
    servers: tuple[ScriptedProvider, ScriptedProvider],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    primary, backup = servers
    result, events = run_case(case, mode, servers, tmp_path)

    assert result["turn_exit_reason"] == case.exit_reason, result.get("error")
    assert result["final_response"] == case.answer
    if case.answer is None:
        assert result["failed"] and case.error_has in result["error"]
    else:
        assert result["completed"] and not result["failed"]
    assert len(primary.requests) == case.requests
    assert len(backup.requests) == case.backup_requests
    assert result["api_calls"] == case.requests + case.backup_requests
    assert primary.invalid_requests == [] and backup.invalid_requests == []
    if case.notice_has:
        notices = [e.message for e in events if isinstance(e, Notice)]
        assert any(case.notice_has in message for message in notices), notices


def test_every_failure_is_attributed_to_its_provider(
    mode: str, servers: tuple[ScriptedProvider, ScriptedProvider], tmp_path: Path
) -> None:
    case = Case("all fail", fails(500, 3), backup=fails(401, 1))
    result, _ = run_case(case, mode, servers, tmp_path)
    assert result["turn_exit_reason"] == "failed:auth"
    error = result["error"]
    assert "every provider failed" in error
    assert "custom:scripted-model server_error" in error
    assert "custom:backup-model auth" in error


def test_retry_after_is_honoured(
    mode: str, servers: tuple[ScriptedProvider, ScriptedProvider], tmp_path: Path
) -> None:
    case = Case("429", [Fail(429, headers={"Retry-After": "0.6"}), text("ok")])
    result, events = run_case(case, mode, servers, tmp_path)
    assert result["final_response"] == "ok"
    notices = [event.message for event in events if isinstance(event, Notice)]
    assert any("rate_limit; retrying in 0.6 s" in notice for notice in notices), notices


def test_refreshed_key_is_sent(
    mode: str, servers: tuple[ScriptedProvider, ScriptedProvider], tmp_path: Path
) -> None:
    case = Case(
        "401", [Fail(401), text("ok")], config={"model.api_key_refresh": lambda: "fresh-key"}
    )
    result, _ = run_case(case, mode, servers, tmp_path)
    assert result["final_response"] == "ok"
    first, second = servers[0].requests
    assert "test-key" in str(first.headers) and "fresh-key" not in str(first.headers)
    assert "fresh-key" in str(second.headers)


def test_nudge_is_in_the_request_only(
    mode: str, servers: tuple[ScriptedProvider, ScriptedProvider], tmp_path: Path
) -> None:
    result, _ = run_case(Case("empty", [Reply(), text("ok")]), mode, servers, tmp_path)
    assert "reply was empty" in str(servers[0].requests[1].body)
    assert "reply was empty" not in str(result["messages"])
    assert [m["role"] for m in result["messages"]] == ["user", "assistant"]


def test_truncated_call_leaves_no_trace_in_the_history(
    mode: str, servers: tuple[ScriptedProvider, ScriptedProvider], tmp_path: Path
) -> None:
    truncated = Reply(tool_calls=[ScriptedCall("add", '{"a": 1, "b"')], finish_reason="length")
    case = Case(
        "truncated",
        [truncated, call("add", {"a": 1, "b": 2}), text("3")],
        config={"model.max_tokens": 100},
    )
    result, _ = run_case(case, mode, servers, tmp_path)
    tool_messages = [m for m in result["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["3"]
    limits = [
        r.body.get("max_tokens") or r.body.get("max_output_tokens") for r in servers[0].requests
    ]
    assert limits[:2] == [100, 200], "the retry after a cut-off call asks for more room"
