"""The default context engine run by the loop's driver: when it compresses, what the model
sees afterwards, what the store keeps, and what happens when the summary cannot be had."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from talaria import Agent
from talaria.agent_tools.services import AgentServices
from talaria.agent_tools.todo import TASK_LIST_TOOL, TodoList
from talaria.config import Config
from talaria.context.compressor import Compressor
from talaria.context.summary import SUMMARY_HEADER, find_summary
from talaria.core import Usage
from talaria.events import Event, Notice, SessionContinued, StatusChanged
from talaria.interrupt import Interrupted, InterruptSignal
from talaria.loop.context import ContextDriver
from talaria.loop.runtime import Runtime
from talaria.loop.session import SessionHandle
from talaria.messages.validate import history_problems
from talaria.plugins.hooks import HookBus
from talaria.policy.approval import ApprovalState
from talaria.providers.factory import resolve_spec
from talaria.providers.resilience.caller import CallerSettings, ModelCaller
from talaria.providers.resilience.chain import ChainEntry, ModelChain
from talaria.store.sqlite import SQLiteSessionStore
from talaria.testing.script import Fail, Reply, Script, call, text
from talaria.testing.scripted_model import ScriptedModel
from talaria.testing.server import ScriptedProvider
from talaria.tools.executor import ToolExecutor

SYSTEM = "You are a careful coding agent."
SUMMARY = "## Goal\nFix the parser.\n## Progress\nRead parser.py.\n## Next steps\nPatch it."


class Setup:
    """A runtime around one scripted model and a real SQLite store, without an Agent."""

    def __init__(self, tmp_path: Path, model: Any, **config: Any) -> None:
        self.events: list[Event] = []
        self.store = SQLiteSessionStore(tmp_path / "state.db")
        settings = {"model.context_length": 2000, "compression.protect_last_n": 4, **config}
        entry = (
            ChainEntry(spec=None, fixed_client=model)
            if hasattr(model, "complete")
            else ChainEntry(spec=model)
        )
        hooks = HookBus()
        services = AgentServices(store=self.store, session_id="parent", todos=TodoList())

        def emit(event: Event) -> None:  # as assembly wires it: the services follow events
            self.events.append(event)
            if isinstance(event, SessionContinued):
                services.follow(event)

        config = Config.load(tmp_path, overrides=settings, env={})
        self.rt = Runtime(
            config=config,
            caller=ModelCaller(
                ModelChain([entry]),
                self.events.append,
                CallerSettings.from_config(config.model, config.retry),
            ),
            tools={},
            executor=ToolExecutor({}, hooks, ApprovalState(), None),
            hooks=hooks,
            emit=emit,
            interrupt=InterruptSignal(),
            cwd=tmp_path,
            home=tmp_path,
            max_iterations=10,
            services=services,
        )
        self.store.create_session(
            "parent", source="cli", model="scripted-model", system_prompt=SYSTEM, cwd=str(tmp_path)
        )
        self.session = SessionHandle("parent", self.store, SYSTEM)
        self.context = ContextDriver(Compressor(self.rt.config), self.rt.config)

    def notices(self) -> list[str]:
        return [event.message for event in self.events if isinstance(event, Notice)]


def conversation(turns: int, size: int = 400) -> list[dict[str, Any]]:
    """User asks, the model reads a file (a long output), then answers; ``turns`` times."""
    history: list[dict[str, Any]] = []
    for number in range(turns):
        history.append({"role": "user", "content": f"question {number}: " + "why " * (size // 4)})
        history.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{number}",
                        "type": "function",
                        "function": {
                            "name": "read_file",
                            "arguments": f'{{"path": "f{number}.py"}}',
                        },
                    }
                ],
            }
        )
        history.append(
            {
                "role": "tool",
                "tool_call_id": f"call_{number}",
                "content": f"contents of f{number}.py " + "x = 1\n" * (size // 6),
            }
        )
        history.append({"role": "assistant", "content": f"answer {number}: " + "ok " * (size // 3)})
    return history


def summariser_input(model: ScriptedModel) -> str:
    return "\n".join(str(m["content"]) for m in model.requests[-1].messages)


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path, ScriptedModel([text(SUMMARY)]))


async def test_a_short_conversation_is_left_alone(setup: Setup) -> None:
    await setup.session.append(*conversation(1))
    await setup.context.before_request(setup.rt, setup.session, object())
    assert setup.session.id == "parent"
    assert setup.rt.caller.chain.active.client().requests == []  # type: ignore[attr-defined]


async def test_past_the_threshold_the_middle_becomes_a_summary_in_a_child_session(
    setup: Setup,
) -> None:
    model: ScriptedModel = setup.rt.caller.chain.active.client()  # type: ignore[assignment]
    history = conversation(6)
    await setup.session.append(*history)
    setup.rt.services.todos.apply(
        [{"id": "1", "content": "patch the parser", "status": "in_progress"}]
    )

    await setup.context.before_request(setup.rt, setup.session, object())

    # the summariser saw the middle (bounded) but not the protected tail
    assert len(model.requests) == 1
    request = model.requests[0]
    assert request.tools == [] and request.stream is False
    seen = summariser_input(model)
    assert "## Goal" in seen and "contents of f1.py" in seen
    assert "answer 5" not in seen
    # what the model sees next: first request, the fenced summary, the last 4 messages
    new = setup.session.history
    assert new[0] == history[0]
    summary = new[find_summary(new) or 0]
    assert summary["content"].startswith(SUMMARY_HEADER)
    assert "<summary>\n" + SUMMARY in summary["content"]
    assert "[>] #1 patch the parser" in summary["content"]
    assert new[-4:] == history[-4:]
    assert len(new) < len(history)
    assert history_problems([{"role": "system", "content": SYSTEM}, *new]) == []
    # a child session holds it, the parent keeps everything
    child = setup.session.id
    assert child != "parent"
    info = setup.store.get_session(child)
    assert info is not None and info.parent_session_id == "parent"
    assert info.system_prompt == SYSTEM and info.source == "cli"
    assert setup.store.load_messages(child) == new
    assert setup.store.load_messages("parent") == history
    assert setup.store.get_state(child, "todos")[0]["content"] == "patch the parser"
    assert setup.rt.services.session_id == child
    assert setup.session.unsaved == 0 and setup.session.next_seq == len(new)
    assert StatusChanged("compressing") in setup.events
    assert any(f"continuing in session {child}" in n for n in setup.notices())
    # the summary's cost counts in the turn
    assert setup.rt.drain_side_usage().output_tokens > 0


async def test_the_estimate_is_anchored_to_the_providers_real_count(setup: Setup) -> None:
    """Two short messages look tiny, but the provider said the prompt was 1,900 tokens."""
    model: ScriptedModel = setup.rt.caller.chain.active.client()  # type: ignore[assignment]
    await setup.session.append(*conversation(3, size=40))
    await setup.context.before_request(setup.rt, setup.session, object())
    assert model.requests == []
    setup.context.record_usage(Usage(input_tokens=1900), len(setup.session.history) + 1)
    await setup.context.before_request(setup.rt, setup.session, object())
    assert len(model.requests) == 1


async def test_recompression_updates_the_previous_summary(tmp_path: Path) -> None:
    model = ScriptedModel([text(SUMMARY), text("## Goal\nFix the parser, then the lexer.")])
    setup = Setup(tmp_path, model)
    await setup.session.append(*conversation(6))
    assert await setup.context.compress(setup.rt, setup.session, object())
    first_child = setup.session.id
    await setup.session.append(*conversation(6)[2:])
    assert await setup.context.compress(setup.rt, setup.session, object())
    assert "<previous-summary>\n" + SUMMARY in summariser_input(model)
    summaries = [m for m in setup.session.history if str(m["content"]).startswith(SUMMARY_HEADER)]
    assert len(summaries) == 1 and "then the lexer" in summaries[0]["content"]
    info = setup.store.get_session(setup.session.id)
    assert info is not None and info.parent_session_id == first_child


async def test_a_failed_summary_trims_old_tool_outputs_and_drops_nothing(tmp_path: Path) -> None:
    setup = Setup(tmp_path, ScriptedModel([Fail(400, "bad request")]))
    history = conversation(6)
    await setup.session.append(*history)
    assert await setup.context.compress(setup.rt, setup.session, object())
    new = setup.session.history
    assert len(new) == len(history)
    assert [m["role"] for m in new] == [m["role"] for m in history]
    trimmed = [m["content"] for m in new if str(m.get("content")).startswith("[output trimmed")]
    assert trimmed and all(c.endswith(" chars]") for c in trimmed)
    assert new[-4:] == history[-4:]
    assert setup.store.load_messages("parent") == history
    assert any("trimmed" in n for n in setup.notices())


async def test_an_empty_summary_also_falls_back(tmp_path: Path) -> None:
    setup = Setup(tmp_path, ScriptedModel([Reply(text="   ")]))
    await setup.session.append(*conversation(6))
    assert await setup.context.compress(setup.rt, setup.session, object())
    assert find_summary(setup.session.history) is None
    assert any(str(m["content"]).startswith("[output trimmed") for m in setup.session.history)


async def test_no_progress_stops_retries_until_the_next_turn(tmp_path: Path) -> None:
    """A summary as long as what it replaces gains nothing: don't loop on it this turn.
    (Summaries are cut to about half the window, so this needs a small conversation.)"""
    bloated = "## Progress\n" + "everything happened " * 700
    model = ScriptedModel([text(bloated), text(SUMMARY)])
    setup = Setup(tmp_path, model, **{"model.context_length": 1000})
    await setup.session.append(*conversation(6, size=100))
    turn = object()
    await setup.context.before_request(setup.rt, setup.session, turn)
    await setup.context.before_request(setup.rt, setup.session, turn)
    assert len(model.requests) == 1
    assert not await setup.context.compress(setup.rt, setup.session, turn)
    await setup.session.append(*conversation(4))
    await setup.context.before_request(setup.rt, setup.session, object())
    assert len(model.requests) == 2


async def test_a_long_tool_loop_is_compressed_once_a_safe_window_opens(setup: Setup) -> None:
    """One request, then tool round after tool round in the same turn: too big early on but
    with nothing safe to cut, compression still happens later in that turn."""
    model: ScriptedModel = setup.rt.caller.chain.active.client()  # type: ignore[assignment]
    rounds = [m for m in conversation(8) if m.get("tool_calls") or m["role"] == "tool"]
    await setup.session.append(conversation(1)[0], *rounds[:2])
    setup.context.record_usage(Usage(input_tokens=1500), len(setup.session.history) + 1)
    turn = object()
    await setup.context.before_request(setup.rt, setup.session, turn)
    assert model.requests == []
    await setup.session.append(*rounds[2:])
    await setup.context.before_request(setup.rt, setup.session, turn)
    assert len(model.requests) == 1
    assert setup.session.history[0] == conversation(1)[0]
    assert history_problems(setup.session.history) == []


async def test_a_failed_summary_with_nothing_to_trim_is_not_retried_this_turn(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([Fail(500, "down"), text(SUMMARY)])
    setup = Setup(tmp_path, model)
    chat = [m for m in conversation(8) if m["role"] != "tool" and not m.get("tool_calls")]
    await setup.session.append(*chat)
    turn = object()
    assert not await setup.context.compress(setup.rt, setup.session, turn)
    await setup.context.before_request(setup.rt, setup.session, turn)
    assert len(model.requests) == 1
    assert setup.session.history == chat and setup.session.id == "parent"
    assert any("compression failed" in n for n in setup.notices())


async def test_at_most_three_compressions_per_turn(tmp_path: Path) -> None:
    model = ScriptedModel([text(SUMMARY)] * 4)
    setup = Setup(tmp_path, model)
    turn = object()
    for _ in range(4):
        await setup.session.append(*conversation(6))
        await setup.context.before_request(setup.rt, setup.session, turn)
    assert len(model.requests) == 3


async def test_compress_says_so_when_there_is_nothing_to_compress(setup: Setup) -> None:
    history = conversation(1)
    await setup.session.append(*history)
    assert not await setup.context.compress(setup.rt, setup.session, None)
    assert setup.session.id == "parent" and setup.session.history == history
    assert setup.rt.caller.chain.active.client().requests == []  # type: ignore[attr-defined]


async def test_focus_reaches_the_summariser(setup: Setup) -> None:
    model: ScriptedModel = setup.rt.caller.chain.active.client()  # type: ignore[assignment]
    await setup.session.append(*conversation(6))
    assert await setup.context.compress(setup.rt, setup.session, None, focus="the database schema")
    assert "focus on: the database schema" in summariser_input(model)


async def test_an_interrupt_during_the_summary_changes_nothing(tmp_path: Path) -> None:
    setup = Setup(tmp_path, ScriptedModel([Reply(text=SUMMARY, delay=5.0)]))
    history = conversation(6)
    await setup.session.append(*history)
    task = asyncio.ensure_future(setup.context.compress(setup.rt, setup.session, object()))
    await asyncio.sleep(0.1)
    setup.rt.interrupt.set()
    with pytest.raises(Interrupted):
        await task
    assert setup.session.id == "parent" and setup.session.history == history


async def test_the_window_comes_from_the_endpoint_when_not_configured(tmp_path: Path) -> None:
    with ScriptedProvider(context_length=4321) as server:
        spec = resolve_spec(
            model="scripted-model",
            provider=None,
            base_url=server.openai_base_url,
            api_key="k",
            api_mode=None,
            env={},
        )
        setup = Setup(tmp_path, spec, **{"model.context_length": None})
        assert await setup.context.window(setup.rt) == 4321
        configured = Setup(tmp_path / "other", spec, **{"model.context_length": 9999})
        assert await configured.context.window(configured.rt) == 9999
        await setup.rt.caller.chain.aclose()


def test_end_to_end_through_the_agent(tmp_path: Path) -> None:
    """Long turns against the strict HTTP provider: the summary request reaches it, the next
    main request carries the summary and the tail, and the session continues as a child."""

    def step(body: dict[str, Any]) -> Reply:
        if "compress the middle" in str(body["messages"][0].get("content")):
            return Reply(text=SUMMARY)
        last = body["messages"][-1]
        if last["role"] == "user" and "plan" in str(last["content"]):
            return call(
                "todo",
                {"todos": [{"id": "1", "content": "write the report", "status": "in_progress"}]},
            )
        return Reply(text="noted: " + "detail " * 60)

    with ScriptedProvider(script=Script(fallback=step)) as server:
        with Agent(
            model="scripted-model",
            base_url=server.openai_base_url,
            api_key="k",
            toolsets=[],
            tools=[TASK_LIST_TOOL],
            home=tmp_path,
            cwd=tmp_path,
            config={"model.context_length": 2000, "compression.protect_last_n": 4},
        ) as agent:
            first = agent.run_conversation("make a plan: " + "context " * 100)
            parent = first["session_id"]
            agent.store.rename(parent, "quarterly report")
            for number in range(6):
                result = agent.run_conversation(f"turn {number}: " + "more words " * 80)
            assert result["completed"]
            summary_requests = [
                r
                for r in server.requests
                if "compress the middle" in str(r.body["messages"][0]["content"])
            ]
            assert summary_requests
            after = server.requests[server.requests.index(summary_requests[0]) + 1].body
            contents = [str(m.get("content")) for m in after["messages"]]
            assert any(c.startswith(SUMMARY_HEADER) and SUMMARY in c for c in contents)
            assert any("write the report" in c for c in contents if c.startswith(SUMMARY_HEADER))
            assert contents[-1].startswith("turn ")
            child = result["session_id"]
            assert child != parent
            lineage = []
            current: str | None = child
            while current is not None:
                lineage.append(current)
                info = agent.store.get_session(current)
                assert info is not None
                current = info.parent_session_id
            assert lineage[-1] == parent
            assert agent.store.resolve("quarterly report") == child, "the title follows the work"
            assert agent.store.get_state(child, "todos")[0]["content"] == "write the report"
            assert result["messages"] == agent.store.load_messages(child)
            assert result["usage"]["output_tokens"] > 0
        assert server.invalid_requests == []


async def test_pre_compact_hooks_hear_why_before_the_history_changes(setup: Setup) -> None:
    """`/compress` is "manual" with or without a focus; past the threshold it is "auto"."""
    heard: list[tuple[str, str, int]] = []

    def hook(trigger: str, session_id: str) -> None:
        heard.append((trigger, session_id, len(setup.store.load_messages(session_id))))

    setup.rt.hooks.register("pre_compact", hook)
    await setup.session.append(*conversation(6))
    assert await setup.context.compress(setup.rt, setup.session, None)
    assert heard == [("manual", "parent", 24)]
    setup.rt.caller.chain.active.client().add(text(SUMMARY))  # type: ignore[attr-defined]
    await setup.session.append(*conversation(6))
    child = setup.session.id
    await setup.context.before_request(setup.rt, setup.session, object())
    assert heard[1][:2] == ("auto", child) and setup.session.id != child
