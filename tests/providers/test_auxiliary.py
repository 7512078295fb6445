"""Side calls: which model answers a side task, what happens when it fails, what it costs."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from talaria.config import Config
from talaria.events import Event, Notice
from talaria.interrupt import Interrupted, InterruptSignal
from talaria.loop.auxiliary import side_call
from talaria.loop.runtime import Runtime
from talaria.plugins.hooks import HookBus
from talaria.policy.approval import ApprovalState
from talaria.providers.errors import ErrorKind, ProviderError
from talaria.providers.factory import resolve_spec
from talaria.providers.resilience.caller import CallerSettings, ModelCaller
from talaria.providers.resilience.chain import ChainEntry, ModelChain
from talaria.testing.script import Fail, Reply, text
from talaria.testing.scripted_model import ScriptedModel
from talaria.testing.server import ScriptedProvider
from talaria.tools.executor import ToolExecutor

ASK = [{"role": "system", "content": "Title this chat."}, {"role": "user", "content": "hi"}]


def make_runtime(
    tmp_path: Path,
    main: Any,
    config: dict[str, Any] | None = None,
    events: list[Event] | None = None,
) -> Runtime:
    """A runtime whose only model is ``main`` (a ScriptedModel or a ProviderSpec)."""
    entry = (
        ChainEntry(spec=None, fixed_client=main)
        if hasattr(main, "complete")
        else ChainEntry(spec=main)
    )
    hooks = HookBus()
    events = [] if events is None else events
    loaded = Config.load(tmp_path, overrides=config or {}, env={})
    return Runtime(
        config=loaded,
        caller=ModelCaller(
            ModelChain([entry]),
            events.append,
            CallerSettings.from_config(loaded.model, loaded.retry),
        ),
        tools={},
        executor=ToolExecutor({}, hooks, ApprovalState(), None),
        hooks=hooks,
        emit=events.append,
        interrupt=InterruptSignal(),
        cwd=tmp_path,
        home=tmp_path,
        max_iterations=5,
    )


def notices(events: list[Event]) -> list[str]:
    return [event.message for event in events if isinstance(event, Notice)]


@pytest.fixture
def server() -> Iterator[ScriptedProvider]:
    with ScriptedProvider() as provider:
        yield provider


async def test_without_configuration_the_main_model_answers(tmp_path: Path) -> None:
    main = ScriptedModel([text("A friendly greeting")], model="gpt-4o-mini", provider="openai")
    rt = make_runtime(tmp_path, main)
    response = await side_call(rt, "title", ASK, max_tokens=50)
    assert response.text == "A friendly greeting"
    request = main.requests[0]
    assert request.stream is False and request.tools == [] and request.max_tokens == 50
    side = rt.drain_side_usage()
    assert side.output_tokens > 0
    assert side.estimated_cost_usd is not None and side.estimated_cost_usd > 0


async def test_a_configured_auxiliary_model_answers_instead_of_the_main_one(
    tmp_path: Path, server: ScriptedProvider
) -> None:
    server.add(text("summary from the cheap model"))
    main = ScriptedModel([])
    rt = make_runtime(
        tmp_path,
        main,
        {
            "auxiliary.compression": {
                "model": "cheap-model",
                "base_url": server.openai_base_url,
                "api_key": "k",
            }
        },
    )
    response = await side_call(rt, "compression", ASK)
    assert response.text == "summary from the cheap model"
    assert server.requests[0].body["model"] == "cheap-model"
    assert server.requests[0].body["stream"] is False
    assert main.requests == []


async def test_a_model_only_entry_runs_on_the_main_endpoint(
    tmp_path: Path, server: ScriptedProvider
) -> None:
    server.add(text("ok"))
    main = resolve_spec(
        model="big-model",
        provider=None,
        base_url=server.openai_base_url,
        api_key="k",
        api_mode=None,
        env={},
    )
    rt = make_runtime(tmp_path, main, {"auxiliary.title.model": "small-model"})
    assert (await side_call(rt, "title", ASK)).text == "ok"
    assert server.requests[0].body["model"] == "small-model"
    assert server.requests[0].headers.get("authorization") == "Bearer k"
    await rt.caller.chain.aclose()


async def test_failures_walk_the_auxiliary_chain_then_the_main_model(
    tmp_path: Path, server: ScriptedProvider
) -> None:
    server.add(Fail(500, "primary aux is down"), Fail(429, "fallback aux is busy"))
    main = ScriptedModel([text("the main model's answer")])
    events: list[Event] = []
    rt = make_runtime(
        tmp_path,
        main,
        events=events,
        config={
            "auxiliary.vision": {
                "model": "aux-a",
                "base_url": server.openai_base_url,
                "api_key": "k",
                "fallback": [
                    {"model": "aux-b", "base_url": server.openai_base_url, "api_key": "k"}
                ],
            }
        },
    )
    response = await side_call(rt, "vision", ASK)
    assert response.text == "the main model's answer"
    assert [r.body["model"] for r in server.requests] == ["aux-a", "aux-b"]
    assert len(main.requests) == 1
    assert len([n for n in notices(events) if "trying the next one" in n]) == 2


async def test_an_unusable_auxiliary_entry_is_skipped(tmp_path: Path) -> None:
    main = ScriptedModel([text("fine")])
    rt = make_runtime(tmp_path, main, {"auxiliary.title": {"model": "m", "provider": "nokeyco"}})
    assert (await side_call(rt, "title", ASK)).text == "fine"


async def test_when_everything_fails_the_last_error_is_raised(tmp_path: Path) -> None:
    main = ScriptedModel([Fail(401, "bad key")])
    rt = make_runtime(tmp_path, main)
    with pytest.raises(ProviderError) as caught:
        await side_call(rt, "title", ASK)
    assert caught.value.kind is ErrorKind.AUTH


async def test_an_interrupt_abandons_the_side_call(tmp_path: Path) -> None:
    rt = make_runtime(tmp_path, ScriptedModel([Reply(text="late", delay=5.0)]))
    task = asyncio.ensure_future(side_call(rt, "title", ASK))
    await asyncio.sleep(0.1)
    rt.interrupt.set()
    with pytest.raises(Interrupted):
        await asyncio.wait_for(task, 2)
    assert rt.drain_side_usage().total_tokens == 0
