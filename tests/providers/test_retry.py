"""The retry layer: the action table, the backoff schedule, the caller that applies them, and
the response repair above it (in-process, against `ScriptedModel`: exact timing, fast tests)."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from pathlib import Path

import pytest

from helpers import FOREVER, MODES, RecordingStream, scripted_agent, when
from talaria.config import Config
from talaria.core import ModelRequest, ModelResponse, StreamHandler, ToolCall
from talaria.events import Event, Notice
from talaria.interrupt import Interrupted, InterruptSignal
from talaria.loop.repair_response import (
    MAX_CONTINUATIONS,
    MAX_TRUNCATION_RETRIES,
    Verdict,
    inspect_response,
    obtain_response,
)
from talaria.providers.errors import ErrorKind, ProviderError
from talaria.providers.resilience.caller import CallerSettings, CallResult, ModelCaller
from talaria.providers.resilience.chain import ChainEntry, ModelChain
from talaria.providers.resilience.retry import ACTIONS, Action, RetryPolicy
from talaria.testing.script import Fail, Reply, ScriptedCall, Stall, Step, text
from talaria.testing.scripted_model import ScriptedModel
from talaria.testing.server import ScriptedProvider

REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}])


def test_every_error_kind_has_exactly_one_action() -> None:
    assert set(ACTIONS) == set(ErrorKind)
    assert ACTIONS[ErrorKind.RATE_LIMIT] is Action.RETRY
    assert ACTIONS[ErrorKind.AUTH] is Action.REFRESH
    assert ACTIONS[ErrorKind.CONTEXT_OVERFLOW] is Action.COMPRESS
    assert ACTIONS[ErrorKind.REFUSAL] is Action.FAIL


def test_backoff_grows_exponentially_with_jitter_and_a_cap() -> None:
    low = RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=5.0, rng=lambda: 0.0)
    high = RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=5.0, rng=lambda: 0.999999)
    assert [low.backoff(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 2.5, 2.5]
    assert [round(high.backoff(n), 3) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]


def test_retry_after_is_used_as_is_until_it_exceeds_the_cap() -> None:
    policy = RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=30.0, rng=lambda: 0.5)
    assert policy.delay(1, 12.0) == 12.0
    assert policy.delay(1, 0.0) == 0.0
    assert policy.delay(1, 31.0) is None, "longer than max_delay: fall back instead of waiting"
    assert policy.delay(2, None) == 1.5


def test_policy_reads_the_retry_config_keys(tmp_path: Path) -> None:
    values = {"retry.max_attempts": 5, "retry.base_delay": 0.25, "retry.max_delay": 4}
    config = Config.load(tmp_path, overrides=values, env={})
    policy = RetryPolicy.from_config(config.retry)
    assert (policy.max_attempts, policy.base_delay, policy.max_delay) == (5, 0.25, 4.0)


def test_caller_settings_are_the_schema_defaults_unless_set(tmp_path: Path) -> None:
    default = Config.load(tmp_path, env={})
    settings = CallerSettings.from_config(default.model, default.retry)
    assert (settings.first_byte_timeout, settings.idle_timeout) == (120.0, 90.0)
    assert (settings.total_timeout, settings.retry.max_attempts) == (600.0, 3)
    values = {"model.first_byte_timeout": 0, "model.total_timeout": 30, "retry.max_delay": 2}
    configured = Config.load(tmp_path, overrides=values, env={})
    settings = CallerSettings.from_config(configured.model, configured.retry)
    assert settings.first_byte_timeout == math.inf, "0 turns the limit off"
    assert (settings.idle_timeout, settings.total_timeout) == (90.0, 30.0)
    assert settings.retry.max_delay == 2.0


def make_caller(
    *models: ScriptedModel, events: list[Event] | None = None, **settings: float
) -> ModelCaller:
    retry = RetryPolicy(
        max_attempts=int(settings.pop("max_attempts", 3)),
        base_delay=settings.pop("base_delay", 0.01),
        max_delay=settings.pop("max_delay", 1.0),
    )
    chain = ModelChain([ChainEntry(spec=None, fixed_client=model) for model in models])
    sink = events if events is not None else []
    limits = CallerSettings.from_config(Config().model, Config().retry)
    return ModelCaller(chain, sink.append, dataclasses.replace(limits, retry=retry, **settings))


def scripted(*steps: Step, model: str = "primary") -> ScriptedModel:
    return ScriptedModel(list(steps), model=model)


async def test_transient_failures_are_retried_on_the_same_model(recorder: RecordingStream) -> None:
    model = scripted(Fail(500), Fail(529), text("ok"))
    events: list[Event] = []
    result = await make_caller(model, events=events).call(REQUEST, recorder, InterruptSignal())
    assert result.response.text == "ok"
    assert result.attempts == 3
    assert [error.kind for error in result.errors] == [ErrorKind.SERVER, ErrorKind.OVERLOADED]
    retries = [e.message for e in events if isinstance(e, Notice) and "retrying in" in e.message]
    assert len(retries) == 2 and "attempt 3 of 3" in retries[-1]


async def test_exhausted_retries_raise_the_last_error_with_its_provider(
    recorder: RecordingStream,
) -> None:
    model = scripted(Fail(503), Fail(503), Fail(503), text("never"))
    caller = make_caller(model)
    with pytest.raises(ProviderError) as caught:
        await caller.call(REQUEST, recorder, InterruptSignal())
    assert caught.value.kind is ErrorKind.SERVER
    assert caught.value.model == "primary"
    assert len(model.requests) == 3
    assert caller.turn_attempts == 3


async def test_non_retryable_errors_are_not_retried(recorder: RecordingStream) -> None:
    model = scripted(Fail(400, message="bad field"), text("never"))
    with pytest.raises(ProviderError) as caught:
        await make_caller(model).call(REQUEST, recorder, InterruptSignal())
    assert caught.value.kind is ErrorKind.BAD_REQUEST
    assert len(model.requests) == 1


async def test_fallback_takes_over_and_the_position_resets_per_turn(
    recorder: RecordingStream,
) -> None:
    primary = scripted(Fail(429), Fail(429), text("primary again"))
    backup = scripted(text("from backup"), model="backup")
    events: list[Event] = []
    caller = make_caller(primary, backup, events=events, max_attempts=2)
    result = await caller.call(REQUEST, recorder, InterruptSignal())
    assert result.response.text == "from backup" and result.client is backup
    assert any(
        "falling back to scripted:backup" in e.message for e in events if isinstance(e, Notice)
    )
    caller.start_turn()
    result = await caller.call(REQUEST, recorder, InterruptSignal())
    assert result.client is primary and result.response.text == "primary again"


@pytest.mark.timeout(60)
async def test_an_interrupt_ends_a_backoff_at_once(recorder: RecordingStream) -> None:
    model = scripted(Fail(500), text("too late"))
    caller = make_caller(model, base_delay=FOREVER, max_delay=FOREVER)
    interrupt = InterruptSignal()
    when(lambda: model.requests, interrupt.set)
    with pytest.raises(Interrupted):
        await caller.call(REQUEST, recorder, interrupt)
    assert len(model.requests) == 1


@pytest.mark.timeout(60)
async def test_a_silent_stream_times_out_and_is_retried(recorder: RecordingStream) -> None:
    stalled = Stall(
        Reply(text="first words then silence", chunk_size=5), after_chunks=2, seconds=FOREVER
    )
    model = scripted(stalled, text("ok"))
    events: list[Event] = []
    caller = make_caller(model, events=events, idle_timeout=0.2)
    result = await caller.call(REQUEST, recorder, InterruptSignal())
    assert result.response.text == "ok"
    assert result.errors[0].kind is ErrorKind.TIMEOUT
    assert "stream_idle_timeout" in result.errors[0].message
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert any("partial answer above is discarded" in message for message in notices)


async def test_no_first_byte_times_out(recorder: RecordingStream) -> None:
    model = scripted(Reply(text="late", delay=30), text("ok"))
    caller = make_caller(model, first_byte_timeout=0.2)
    result = await caller.call(REQUEST, recorder, InterruptSignal())
    assert result.response.text == "ok"
    assert "first_byte_timeout" in result.errors[0].message
    assert recorder.texts == ["ok"], "nothing from the abandoned attempt reached the stream"


async def test_time_the_loop_was_blocked_does_not_count_as_silence(
    recorder: RecordingStream,
) -> None:
    class BlockingModel(ScriptedModel):
        async def complete(self, request: ModelRequest, stream: StreamHandler) -> ModelResponse:
            time.sleep(0.6)  # e.g. importing an SDK on first use: the loop cannot listen
            await asyncio.sleep(0.05)
            return await super().complete(request, stream)

    model = BlockingModel([text("ok")])
    caller = make_caller(model, first_byte_timeout=0.3)
    result = await caller.call(REQUEST, recorder, InterruptSignal())
    assert result.response.text == "ok" and result.attempts == 1


# ---- response repair: answers that arrived but cannot be used as they are ----------------


def build(notes: list[str]) -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": "\n".join(["hi", *notes])}])


async def obtain(model: ScriptedModel, events: list[Event] | None = None) -> CallResult:
    caller = make_caller(model, events=events)
    return await obtain_response(caller, build, RecordingStream(), InterruptSignal())


def test_verdicts() -> None:
    assert inspect_response(ModelResponse(text="hi")) is Verdict.USABLE
    assert inspect_response(ModelResponse(text="  \n")) is Verdict.EMPTY
    assert inspect_response(ModelResponse(text=None, reasoning="hmm")) is Verdict.REASONING_ONLY
    assert inspect_response(ModelResponse(text=None, finish_reason="content_filter")) is (
        Verdict.REFUSAL
    )
    assert inspect_response(ModelResponse(text="so far", finish_reason="length")) is (
        Verdict.CUT_OFF
    )
    complete_looking = ModelResponse(
        text=None, finish_reason="length", tool_calls=[ToolCall("c1", "write_file", "{}")]
    )
    assert inspect_response(complete_looking) is Verdict.TRUNCATED_CALLS


async def test_continuations_are_capped_and_joined() -> None:
    model = scripted(*[Reply(text=f"part{n} ", finish_reason="length") for n in range(6)])
    events: list[Event] = []
    result = await obtain(model, events)
    assert result.response.text == "part0 part1 part2 part3 "
    assert len(model.requests) == 1 + MAX_CONTINUATIONS
    assert any("still cut off" in e.message for e in events if isinstance(e, Notice))
    last = model.requests[-1].messages
    assert last[-2] == {"role": "assistant", "content": "part0 part1 part2 "}
    assert "cut off by the output limit" in last[-1]["content"]


async def test_a_continuation_that_repeats_itself_ends_the_answer() -> None:
    model = scripted(
        Reply(text="same", finish_reason="length"),
        Reply(text="same", finish_reason="length"),
        text("never asked"),
    )
    result = await obtain(model)
    assert result.response.text == "same"
    assert len(model.requests) == 2


async def test_reasoning_from_every_attempt_is_kept() -> None:
    model = scripted(Reply(reasoning="first thoughts"), text("ok", reasoning="more thoughts"))
    result = await obtain(model)
    assert result.response.text == "ok"
    assert result.response.reasoning == "first thoughts\n\nmore thoughts"
    assert result.usage.output_tokens > result.response.usage.output_tokens, (
        "the spend of the reasoning-only answer is counted too"
    )
    assert "reply was empty" in model.requests[1].messages[-1]["content"]


async def test_truncated_calls_are_retried_then_fail_with_the_reason() -> None:
    cut = Reply(
        tool_calls=[ScriptedCall("write_file", '{"path": "a", "content": "abc')],
        finish_reason="length",
    )
    model = scripted(cut, cut, cut, text("never asked"))
    with pytest.raises(ProviderError) as caught:
        await obtain(model)
    assert caught.value.kind is ErrorKind.TRUNCATED
    assert "max_tokens" in caught.value.message
    assert len(model.requests) == 1 + MAX_TRUNCATION_RETRIES


async def test_a_refusal_is_an_error_carrying_its_text() -> None:
    model = scripted(Reply(refusal="Not something I can do."), text("never asked"))
    with pytest.raises(ProviderError) as caught:
        await obtain(model)
    assert caught.value.kind is ErrorKind.REFUSAL
    assert "Not something I can do." in str(caught.value)
    assert len(model.requests) == 1


@pytest.mark.parametrize("mode", MODES)
def test_slowly_streamed_tool_arguments_keep_the_stream_alive(mode: str, tmp_path: Path) -> None:
    """Arguments arriving bit by bit (a long file write) are progress, not an idle stream."""
    slow = Reply(
        tool_calls=[ScriptedCall("add", {"a": 20, "b": 22})], chunk_size=2, chunk_delay=0.3
    )
    config = {"model.stream_idle_timeout": 1.0, "retry.base_delay": 0.01}
    server = ScriptedProvider([slow, text("42")])
    with server, scripted_agent(server, tmp_path, mode, config=config) as agent:
        result = agent.run_conversation(user_message="add slowly")
        assert len(server.requests) == 2, "the slow stream must not be cut and retried"
    assert result["final_response"] == "42"
    assert [m["content"] for m in result["messages"] if m["role"] == "tool"] == ["42"]
