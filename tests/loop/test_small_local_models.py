"""What a user with a laptop, a local server and no API key met (issue 27), each as a test:
no output limit was sent, a loopback llama.cpp showed "cost unknown", `chat()` returned ''
when the server was down, `doctor` called the model SDKs missing, and `/tools` listed tools
the model never got. Driven through a real Agent, the scripted HTTP provider playing a
llama.cpp server (``n_ctx``), and the real `talaria` program."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from helpers import MODES, add, base_url, tool_results
from pty_terminal import TALARIA, Terminal
from talaria import Agent, TurnFailed
from talaria.providers.profiles.context_windows import forget_endpoint_windows
from talaria.testing import Reply, ScriptedCall, ScriptedProvider, text

FIELDS = {
    "chat_completions": "max_tokens",
    "codex_responses": "max_output_tokens",
    "anthropic_messages": "max_tokens",
}


@pytest.fixture(autouse=True)
def fresh_probes() -> None:
    forget_endpoint_windows()  # each test's server is a new one on a new port


def agent(server: ScriptedProvider, home: Path, mode: str = "chat_completions", **kw: Any) -> Agent:
    kw.setdefault("toolsets", [])
    return Agent(
        model="qwen2.5-coder",
        base_url=base_url(server, mode),
        api_mode=mode,
        home=home,
        cwd=home,
        **kw,
    )


def sent_limit(server: ScriptedProvider, mode: str) -> Any:
    return server.requests[-1].body.get(FIELDS[mode])


@pytest.mark.parametrize("mode", MODES)
def test_a_local_server_gets_an_output_limit_from_its_window(tmp_path: Path, mode: str) -> None:
    """Before: no limit, and a runaway generation ran until the 600 s timeout, then again."""
    with ScriptedProvider([text("hi")], n_ctx=4096) as server, agent(server, tmp_path, mode) as a:
        assert a.chat("hi") == "hi"
    expected = 8192 if mode == "anthropic_messages" else 4096 // 4  # Anthropic: its own default
    assert sent_limit(server, mode) == expected


def test_the_limit_is_capped_and_model_max_tokens_wins(tmp_path: Path) -> None:
    with ScriptedProvider([text("a"), text("b")], n_ctx=131_072) as server:
        with agent(server, tmp_path) as a:
            a.chat("one")
        assert sent_limit(server, "chat_completions") == 8192
        with agent(server, tmp_path, config={"model.max_tokens": 300}) as a:
            a.chat("two")
        assert sent_limit(server, "chat_completions") == 300


@pytest.mark.parametrize("mode", MODES)
def test_a_call_cut_off_by_the_limit_is_asked_again_once_within_the_window(
    tmp_path: Path, mode: str
) -> None:
    """Before: asked twice more, the limit doubled each time past the window (3000, 6000,
    12000 tokens): a small model that repeats itself kept generating for minutes."""
    cut = Reply(
        tool_calls=[ScriptedCall("add", '{"a": 1, "b": 2222222222222')], finish_reason="length"
    )
    config = {"model.max_tokens": 3000}
    server = ScriptedProvider([cut, cut, cut, text("never asked")], n_ctx=4096)
    with server, agent(server, tmp_path, mode, tools=[add], config=config) as a:
        result = a.run_conversation("add them")
    assert [request.body.get(FIELDS[mode]) for request in server.requests] == [3000, 4096]
    assert result["failed"] and "cut off by the output limit" in result["error"]
    assert not tool_results(result), "a cut-off call never runs"


@pytest.mark.parametrize("mode", MODES)
def test_an_empty_reply_after_the_tools_is_asked_for_the_answer(tmp_path: Path, mode: str) -> None:
    """Qwen2.5-Coder 1.5B replied empty once its tools had run; the old note ("no text and no
    tool call. Continue from where you are") made it answer that it had nothing to continue
    from. The note now asks for the answer to the user's request."""
    replies = [Reply(tool_calls=[ScriptedCall("add", {"a": 2, "b": 40})]), Reply(), text("42")]
    with ScriptedProvider(replies) as server, agent(server, tmp_path, mode, tools=[add]) as a:
        result = a.run_conversation("add 2 and 40")
    assert result["final_response"] == "42" and tool_results(result) == ["42"]
    asked = str(server.requests[-1].body)
    assert "Answer the user's request now" in asked
    assert "Continue from where you are" not in asked


def test_the_big_apis_keep_their_own_limits(tmp_path: Path) -> None:
    with ScriptedProvider([text("hi")]) as server:
        with agent(server, tmp_path, provider="openai", api_key="k") as a:
            a.chat("hi")
        body = server.requests[-1].body
    assert "max_tokens" not in body and "max_completion_tokens" not in body


def test_a_loopback_llama_cpp_server_costs_nothing_without_a_provider(tmp_path: Path) -> None:
    """Before: "cost unknown" unless --provider llamacpp was given."""
    usage = {"input_tokens": 1000, "output_tokens": 200}
    server = ScriptedProvider([text("hi", usage=usage)], n_ctx=8192)
    with server, agent(server, tmp_path, config={"compression.enabled": False}) as a:
        result = a.run_conversation("hi")
    assert result["usage"]["estimated_cost_usd"] == 0.0


@pytest.mark.parametrize("n_ctx", [8192, None])
def test_a_loopback_server_is_asked_what_it_is_once_on_one_connection(
    tmp_path: Path, n_ctx: int | None
) -> None:
    """The window probe and the local-server check asked the same paths, each on connections of
    its own (over https a handshake each): nine requests on five connections before the first
    answer. Now each path once, one after the other on the connection the turn then uses."""
    usage = {"input_tokens": 1000, "output_tokens": 200}
    server = ScriptedProvider([text("hi", usage=usage)], n_ctx=n_ctx)
    with server, agent(server, tmp_path) as a:
        result = a.run_conversation("hi")
        assert server.connections_opened == 1
    assert result["usage"]["estimated_cost_usd"] == (0.0 if n_ctx else None)


def test_a_loopback_server_of_no_known_kind_is_not_called_free(tmp_path: Path) -> None:
    usage = {"input_tokens": 1000, "output_tokens": 200}
    server = ScriptedProvider([text("hi", usage=usage)])  # not llama.cpp: no /props
    with server, agent(server, tmp_path) as a:
        result = a.run_conversation("hi")
    assert result["usage"]["estimated_cost_usd"] is None


def test_chat_raises_when_the_server_is_unreachable(tmp_path: Path) -> None:
    """Before: chat() returned '' as if that were the answer."""
    a = Agent(
        model="m",
        base_url="http://127.0.0.1:9/v1",
        home=tmp_path,
        cwd=tmp_path,
        toolsets=[],
        config={"retry.max_attempts": 1},
    )
    with a, pytest.raises(TurnFailed) as failed:
        a.chat("hi")
    assert failed.value.result["failed"] is True
    assert str(failed.value) == failed.value.result["error"] and "127.0.0.1:9" in str(failed.value)


def test_chat_still_returns_the_answer(tmp_path: Path) -> None:
    with ScriptedProvider([text("the answer")]) as server, agent(server, tmp_path) as a:
        assert a.chat("q") == "the answer"


def test_the_tools_listed_are_the_tools_the_model_gets(tmp_path: Path) -> None:
    """Before: 11 listed before the first turn while a small window gave the model 5."""
    server = ScriptedProvider([text("ok")], n_ctx=4096)
    with server, agent(server, tmp_path, toolsets=None) as a:
        listed = sorted(a.tools)
        a.chat("hi")
        offered = sorted(t["function"]["name"] for t in server.requests[-1].body["tools"])
    assert listed == offered == ["patch", "read_file", "search_files", "terminal", "write_file"]


def test_slash_tools_in_the_chat_lists_the_lean_set(tmp_path: Path) -> None:
    with ScriptedProvider([text("ok")], n_ctx=4096) as server:
        args = ["chat", "-m", "qwen", "--base-url", server.openai_base_url]
        terminal = Terminal([*args, "--toolsets", "terminal,file,todo,memory"], tmp_path, tmp_path)
        try:
            terminal.expect("/help for commands")
            terminal.send("/tools")
            terminal.expect("approvals:")
            listed = terminal.text[terminal.text.rfind("/tools") :]
        finally:
            terminal.child.close(force=True)
    assert "write_file" in listed and "terminal" in listed
    assert "todo" not in listed and "memory" not in listed


def test_doctor_does_not_ask_for_the_model_sdks(tmp_path: Path) -> None:
    """Before: "openai ✗ missing · anthropic ✗ missing" where talaria never imports them."""
    env = {**os.environ, "TALARIA_HOME": str(tmp_path)}
    done = subprocess.run(
        [TALARIA, "doctor"], capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path
    )
    line = next(line for line in done.stdout.splitlines() if line.split()[:1] == ["packages"])
    assert "openai" not in line and "anthropic" not in line
    assert "✓" in line and "rich" in line and "missing" not in line
