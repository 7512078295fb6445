"""Building blocks shared by the tests that drive a whole Agent against the scripted provider."""

from __future__ import annotations

import base64
import os
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from talaria import Agent, tool
from talaria.testing.server import ScriptedProvider

MODES = ["chat_completions", "codex_responses", "anthropic_messages"]
SRC = Path(__file__).resolve().parent.parent / "src"

FOREVER = 3600.0
"""A delay no passing test waits out: when the behaviour under test (an interrupt, a timeout,
a cancel) fails, the test hangs until pytest-timeout ends it, instead of asserting a time."""


Served = TypeVar("Served", bound=socketserver.BaseServer)


@contextmanager
def serving(server: Served) -> Iterator[Served]:
    """Serve `server` from a thread for the block, then shut it down and close it. The thread
    looks for the shutdown every 10 ms: with serve_forever's default of half a second, every
    test that stops a server would wait out about a quarter second in its teardown."""
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def run_python(code: str, *argv: str, cwd: Path, home: Path | None = None) -> str:
    """Run ``code`` in a fresh interpreter on this checkout's talaria (``home`` as
    TALARIA_HOME) and return what it printed; a failure shows the end of its stderr."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    if home is not None:
        env["TALARIA_HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def outside_tmp() -> Path:
    """A fresh directory outside /tmp, for files a sandboxed command must (not) reach: the
    sandbox gives every command a private /tmp, which would hide a directory there rather
    than protect it. The caller removes it."""
    import tempfile

    for candidate in ("/var/tmp", str(Path(__file__).parent)):
        if os.access(candidate, os.W_OK) and not candidate.startswith("/tmp"):
            return Path(tempfile.mkdtemp(prefix="talaria-outside-", dir=candidate))
    raise AssertionError("no writable directory outside /tmp for the sandbox tests")


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


def base_url(server: ScriptedProvider, mode: str) -> str:
    """Each SDK's own convention: Anthropic's base URL has no /v1, OpenAI's does."""
    return server.anthropic_base_url if mode == "anthropic_messages" else server.openai_base_url


def scripted_agent(
    server: ScriptedProvider, home: Path, mode: str = "chat_completions", **kwargs: Any
) -> Agent:
    """An Agent on the scripted provider, with only the `add` tool and no compression unless
    the test says otherwise; `config` entries are merged over those defaults."""
    config = {"context.engine": "none", **kwargs.pop("config", {})}
    kwargs.setdefault("model", "scripted-model")
    kwargs.setdefault("api_key", "test-key")
    kwargs.setdefault("tools", [add])
    kwargs.setdefault("toolsets", [])
    kwargs.setdefault("cwd", home)
    return Agent(base_url=base_url(server, mode), api_mode=mode, home=home, config=config, **kwargs)


def tool_results(result: dict[str, Any]) -> list[str]:
    return [m["content"] for m in result["messages"] if m["role"] == "tool"]


def per_task_script(delay: float = 0.0, tool: str = "todo", arguments: Any = None) -> Any:
    """A scripted model for batches: each task calls `tool` once (the todo list by default),
    then answers "done: <its prompt>"; every reply waits `delay` seconds first."""
    from talaria.testing import Script, call, text

    def step(body: dict[str, Any]) -> Any:
        messages = body.get("messages") or []
        prompt = next(m["content"] for m in messages if m.get("role") == "user")
        if messages[-1].get("role") == "user":
            return call(tool, arguments or {}, delay=delay)
        return text(f"done: {prompt}", delay=delay)

    return Script(fallback=step)


def asked_prompts(server: ScriptedProvider) -> list[str]:
    """The user prompt of every request the server received, in order."""
    prompts = []
    for request in list(server.requests):
        messages = request.body.get("messages") or []
        prompts.append(next(m["content"] for m in messages if m.get("role") == "user"))
    return prompts


@dataclass
class RecordingStream:
    """A StreamHandler that keeps every delta, in order."""

    texts: list[str] = field(default_factory=list)
    reasonings: list[str] = field(default_factory=list)
    tool_calls: list[tuple[int, str, str]] = field(default_factory=list)
    arguments: dict[int, list[str]] = field(default_factory=dict)

    def text(self, delta: str) -> None:
        self.texts.append(delta)

    def reasoning(self, delta: str) -> None:
        self.reasonings.append(delta)

    def tool_call(self, index: int, call_id: str, name: str) -> None:
        self.tool_calls.append((index, call_id, name))

    def tool_arguments(self, index: int, delta: str) -> None:
        self.arguments.setdefault(index, []).append(delta)


def when(condition: Callable[[], object], then: Callable[[], object]) -> threading.Thread:
    """Call `then` from a background thread as soon as `condition()` holds (polled; the test's
    own timeout bounds the wait): e.g. interrupt once the model call has arrived."""

    def watch() -> None:
        while not condition():
            time.sleep(0.01)
        then()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    return watcher


def images_sent(body: dict[str, Any]) -> list[bytes]:
    """The decoded images of a request body, whatever its wire format."""
    found = []
    for item in [*body.get("messages", []), *body.get("input", [])]:
        content = item.get("content") if isinstance(item, dict) else None
        for part in content if isinstance(content, list) else []:
            kind = part.get("type")
            if kind == "image":
                found.append(base64.b64decode(part["source"]["data"]))
            elif kind in ("image_url", "input_image"):
                ref = part["image_url"]
                url = ref["url"] if isinstance(ref, dict) else ref
                found.append(base64.b64decode(url.split(";base64,", 1)[1]))
    return found
