"""Local models as a user runs them: a llama.cpp-like server with a small window, probed for
the window it really serves, overflowing it turn after turn, recovered by compression."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from talaria import Agent
from talaria.context.summary import SUMMARISER_INSTRUCTIONS
from talaria.events import Notice
from talaria.messages.validate import history_problems
from talaria.providers.profiles.context_windows import (
    fetch_endpoint_context_length,
    forget_endpoint_windows,
)
from talaria.testing import Reply, Script, ScriptedProvider

WINDOW = 2048
BIG = "Here is more of the log I need you to read carefully. " * 95  # ~1300 tokens


def small_model(body: dict[str, Any]) -> Reply:
    """Summaries for the compressor, a short answer for everything else."""
    messages = body.get("messages") or []
    if messages and str(messages[0].get("content")).startswith(SUMMARISER_INSTRUCTIONS[:40]):
        return Reply(text="## Goal\nRead the logs.\n## Progress\nRead some of them.")
    turn = sum(1 for m in messages if m.get("role") == "user")
    return Reply(text=f"answer {turn}")


def local_agent(server: ScriptedProvider, home: Path, events: list[Any], **config: Any) -> Agent:
    return Agent(
        model="qwen2.5-coder-0.5b",
        base_url=server.openai_base_url,
        toolsets=[],
        home=home,
        cwd=home,
        config=config,
        event_callback=events.append,
    )


def run_five_overflowing_turns(agent: Agent) -> list[dict[str, Any]]:
    results = []
    with agent:
        for number in range(5):
            results.append(agent.run_conversation(f"turn {number}: {BIG}"))
        stored = agent.store.load_messages(agent.session_id or "")
    assert [r["completed"] for r in results] == [True] * 5, [r.get("error") for r in results]
    assert results[0]["final_response"] == "answer 1"
    assert history_problems(results[-1]["messages"]) == []
    assert history_problems(stored) == []
    assert stored[-2]["content"].startswith("turn 4: ")
    return results


def test_five_turns_over_a_2048_window_complete_through_compression(tmp_path: Path) -> None:
    """The window is read from the server (/props n_ctx, not the training context), so the
    history is compressed before each request would overflow it."""
    with ScriptedProvider(script=Script(fallback=small_model), n_ctx=WINDOW) as server:
        events: list[Any] = []
        run_five_overflowing_turns(local_agent(server, tmp_path, events))
        assert server.invalid_requests == []
        compressions = [e for e in events if isinstance(e, Notice) and "compressed" in e.message]
        assert len(compressions) >= 4
        assert server.overflows == 0


def test_overflow_errors_are_recovered_when_the_window_is_misconfigured(tmp_path: Path) -> None:
    """A wrong model.context_length means every turn hits llama.cpp's context error; each is
    compressed away and resent, and no turn is lost."""
    with ScriptedProvider(script=Script(fallback=small_model), n_ctx=WINDOW) as server:
        events: list[Any] = []
        agent = local_agent(server, tmp_path, events, **{"model.context_length": 200_000})
        run_five_overflowing_turns(agent)
        assert server.overflows >= 4
        retried = [e for e in events if isinstance(e, Notice) and "compressing" in e.message]
        assert len(retried) == server.overflows


def test_compress_makes_room_in_a_small_window(tmp_path: Path) -> None:
    """/compress right after one big exchange: the configured tail (20 messages) would keep
    everything, so it keeps less rather than saying there is nothing to compress."""
    with ScriptedProvider(script=Script(fallback=small_model), n_ctx=WINDOW) as server:
        agent = local_agent(server, tmp_path, [])
        with agent:
            agent.run_conversation(f"first: {BIG}")
            before = sum(len(str(m.get("content"))) for m in agent.messages)
            assert agent.compress()
            after = sum(len(str(m.get("content"))) for m in agent.messages)
            assert history_problems(agent.messages) == []
        assert after < before / 2


# ---- the window each kind of local server reports --------------------------------------


@pytest.fixture
def local_server() -> Iterator[dict[str, Any]]:
    """A server whose answer per path each test sets (GET and POST), 404 elsewhere."""
    routes: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            payload = routes.get(f"{self.command} {self.path}")
            data = json.dumps(payload if payload is not None else {"error": "no"}).encode()
            self.send_response(200 if payload is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    routes["url"] = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield routes
    httpd.shutdown()
    httpd.server_close()


def test_llama_cpp_n_ctx_wins_over_the_training_context(local_server: dict[str, Any]) -> None:
    local_server["GET /v1/models"] = {"data": [{"id": "q", "meta": {"n_ctx_train": 32768}}]}
    local_server["GET /props"] = {"default_generation_settings": {"n_ctx": 8192}}
    url = local_server["url"] + "/v1"
    assert _run(fetch_endpoint_context_length(url, None, "q")) == 8192
    del local_server["GET /props"]
    local_server["GET /slots"] = [{"id": 0, "n_ctx": 4096}]
    assert _run(fetch_endpoint_context_length(url, None, "q")) == 4096


def test_ollama_num_ctx_and_its_default(local_server: dict[str, Any]) -> None:
    local_server["POST /api/show"] = {"parameters": "stop <|im_end|>\nnum_ctx 16384"}
    local_server["GET /v1/models"] = {"data": [{"id": "llama3.2"}]}
    url = local_server["url"] + "/v1"
    assert _run(fetch_endpoint_context_length(url, None, "llama3.2")) == 16384
    local_server["POST /api/show"] = {"parameters": "stop <|im_end|>", "model_info": {}}
    assert _run(fetch_endpoint_context_length(url, None, "llama3.2")) == 4096


def test_lm_studio_loaded_context_and_vllm_max_model_len(local_server: dict[str, Any]) -> None:
    local_server["GET /api/v0/models"] = {
        "data": [{"id": "qwen", "loaded_context_length": 12000, "max_context_length": 32768}]
    }
    url = local_server["url"] + "/v1"
    assert _run(fetch_endpoint_context_length(url, None, "qwen")) == 12000
    del local_server["GET /api/v0/models"]
    local_server["GET /v1/models"] = {"data": [{"id": "qwen", "max_model_len": 24576}]}
    assert _run(fetch_endpoint_context_length(url, None, "qwen")) == 24576


def _run(coro: Any) -> Any:
    import asyncio

    forget_endpoint_windows()  # each call here asks a server whose answers just changed
    return asyncio.run(coro)
